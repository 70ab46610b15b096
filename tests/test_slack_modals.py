"""Edit modals Slack accepts whatever the tool looks like: argument names longer than a
block_id may be, a property called `address.city` beside an object `address` with a `city`
(two inputs, each edited on its own), and a number Slack cannot show (a model's `1e999`).
Each modal is checked against Slack's limits, and an untouched modal gives back what was
proposed."""

from __future__ import annotations

import json
from typing import Any

from pizzabot.agent.argforms import form_fields
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.channels.slack import blocks
from pizzabot.channels.slack.blocks import ModalRef
from tests.peers.slack_api import (
    block_actions,
    filled_values,
    payload_problems,
    view_submission,
)
from tests.test_slack_home import AT, Home, home  # noqa: F401  (the fixture)

LONG = "n" * 260
DEEP = ("a" * 100, "b" * 100, "c" * 100)

SCHEMAS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "a 260-character argument name": (
        {"type": "object", "properties": {LONG: {"type": "string"}, "to": {"type": "string"}}},
        {LONG: "long", "to": "ann@example.com"},
    ),
    "a 302-character nested path": (
        {
            "type": "object",
            "properties": {
                DEEP[0]: {
                    "type": "object",
                    "properties": {
                        DEEP[1]: {
                            "type": "object",
                            "properties": {DEEP[2]: {"type": "string"}},
                        }
                    },
                },
                "to": {"type": "string"},
            },
        },
        {DEEP[0]: {DEEP[1]: {DEEP[2]: "deep"}}, "to": "ann@example.com"},
    ),
    "a dotted name beside an object": (
        {
            "type": "object",
            "properties": {
                "address.city": {"type": "string"},
                "address": {"type": "object", "properties": {"city": {"type": "string"}}},
                "to": {"type": "string"},
            },
        },
        {"address.city": "Lyon", "address": {"city": "Paris"}, "to": "ann@example.com"},
    ),
    "numbers Slack can and cannot show": (
        {
            "type": "object",
            "properties": {
                "huge": {"type": "number"},
                "big": {"type": "integer"},
                "small": {"type": "number"},
                "to": {"type": "string"},
            },
        },
        {
            "huge": json.loads("1e999"),  # what a model's 1e999 becomes: inf
            "big": 10**20,
            "small": 1e-7,
            "to": "ann@example.com",
        },
    ),
}


def item(schema: dict[str, Any], args: dict[str, Any], item_id: str = "it1") -> Item:
    return Item(
        id=item_id,
        run_id="run-" + item_id,
        skill="sales",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="sales wants to run crm.send_email",
        body="Mailing Ann.",
        created_at=AT,
        call_id="c1",
        tool="crm.send_email",
        args=args,
        schema=schema,
    )


def test_every_modal_is_one_slack_accepts_and_an_untouched_one_gives_back_the_proposal() -> None:
    for what, (schema, args) in SCHEMAS.items():
        view = blocks.edit_modal(item(schema, args), ref=ModalRef("it1", "C1"), base_url="http://p")
        assert payload_problems("views.open", {"view": view}) == [], what
        fields = form_fields(schema, args)
        got, errors = blocks.submitted_args(schema, fields, filled_values(view))
        assert errors == {}, what
        expected = {k: v for k, v in args.items() if k != "huge"}  # inf cannot be sent back
        assert got == expected, what


def test_a_number_slack_cannot_show_is_left_empty_and_said_so() -> None:
    schema, args = SCHEMAS["numbers Slack can and cannot show"]
    view = blocks.edit_modal(item(schema, args), ref=ModalRef("it1"), base_url="http://p")
    inputs = {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}
    assert "initial_value" not in inputs["huge"]["element"]
    assert "The proposed value Infinity cannot be shown here" in inputs["huge"]["hint"]["text"]
    assert inputs["big"]["element"]["initial_value"] == "100000000000000000000"
    assert inputs["small"]["element"]["initial_value"] == "0.0000001"


def inputs_by_label(view: dict[str, Any]) -> dict[str, str]:
    """The block_id of each input of a modal, by its label."""
    return {b["label"]["text"]: b["block_id"] for b in view["blocks"] if b["type"] == "input"}


def test_a_dotted_name_and_a_nested_field_are_two_inputs_edited_apart() -> None:
    schema, args = SCHEMAS["a dotted name beside an object"]
    view = blocks.edit_modal(item(schema, args), ref=ModalRef("it1"), base_url="http://p")
    ids = inputs_by_label(view)
    assert set(ids) == {"address.city", "address › city", "to"}
    fields = form_fields(schema, args)
    state = filled_values(view, **{ids["address.city"]: "Nice", ids["address › city"]: "Brest"})
    got, errors = blocks.submitted_args(schema, fields, state)
    assert errors == {}
    assert got == {"address.city": "Nice", "address": {"city": "Brest"}, "to": "ann@example.com"}


async def test_edit_through_slack_with_a_hostile_schema(home: Home) -> None:  # noqa: F811
    schema, args = SCHEMAS["a dotted name beside an object"]
    run = await home.store.create_run(
        run_id="run-hostile", skill="sales", input="go", trigger="test", now=AT
    )
    made = item(schema, args, "hostile")
    made = Item(**{**made.__dict__, "run_id": run.id})
    await home.store.create_item(made, targets=[], lease=None, now=AT)

    click = block_actions(
        action_id=blocks.EDIT, value=made.id, user="U1", channel="C1", message_ts="1.1"
    )
    assert (await home.post_payload(click)).is_success
    [opened] = await home.slack.wait_for(
        "views.open", lambda c: c.args.get("trigger_id") == click["trigger_id"]
    )
    view = opened.args["view"]
    home.slack.check()

    ids = inputs_by_label(view)
    typed = {ids["address.city"]: "Nice", ids["address › city"]: "Brest"}
    submitted = view_submission(view=view, user="U1", values=filled_values(view, **typed))
    r = await home.post_payload(submitted)
    assert r.status_code == 200 and not r.content, r.text  # the modal closes
    decided = await home.item_when(made.id, ItemStatus.EDITED)
    assert decided.final_args == {
        "address.city": "Nice",
        "address": {"city": "Brest"},
        "to": "ann@example.com",
    }
