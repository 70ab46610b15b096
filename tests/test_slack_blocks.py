"""Block Kit rendering of inbox items and the edit/reject modals (pure functions, no Slack)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pizzabot.agent.argforms import coerce_form, form_fields
from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Risk, Run, RunStatus
from pizzabot.channels.slack import blocks
from pizzabot.channels.slack.blocks import ModalRef

BASE = "http://pizza.example"
AT = datetime(2026, 11, 29, 12, 30, tzinfo=UTC)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "Recipient."},
        "body": {"type": "string"},
        "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
        "copies": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
        "ratio": {"type": "number"},
        "receipt": {"type": "boolean", "default": False},
        "tags": {"type": "array", "items": {"type": "string"}},
        "cc": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["to", "body"],
}
ARGS: dict[str, Any] = {
    "to": "ann@example.com",
    "body": "Hello Ann,\nhere is the quote.",
    "priority": "normal",
    "copies": 2,
    "ratio": 0.5,
    "receipt": True,
    "tags": ["quote", "q4"],
    "cc": None,
}


#: The edit modal's block_id of each argument: its index in the form, never its name.
B = {f.name: blocks.field_block(i) for i, f in enumerate(form_fields(SCHEMA, ARGS))}
NAMES = {block_id: name for name, block_id in B.items()}


def action(**over: Any) -> Item:
    item = Item(
        id="it1",
        run_id="run1",
        skill="sales",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="sales wants to run crm.send_email",
        body="I will mail Ann the <quote> & the terms.",
        created_at=AT,
        call_id="c1",
        tool="crm.send_email",
        args=dict(ARGS),
        schema=SCHEMA,
        risk=Risk(impact="high", reversible=False, scope="external"),
    )
    return replace(item, **over)


def text_of(msg: blocks.Message) -> str:
    return json.dumps(msg.blocks, ensure_ascii=False)


def actions(msg: blocks.Message) -> list[dict[str, Any]]:
    return [b for b in msg.blocks if b["type"] == "actions"]


def test_a_pending_action_shows_tool_risk_arguments_and_three_buttons() -> None:
    item = action()
    msg = blocks.message(item, base_url=BASE)
    shown = text_of(msg)
    assert msg.blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "sales: approval needed", "emoji": True},
    }
    assert "I will mail Ann the &lt;quote&gt; &amp; the terms." in shown  # escaped for mrkdwn
    assert "`send_email` on server `crm`" in shown
    assert "impact *high* · *not reversible* · scope *external*" in shown
    assert "*to*: ann@example.com" in shown and '*tags*: [\\"quote\\", \\"q4\\"]' in shown
    assert f"<{BASE}/items/it1|Open on the web page>" in shown
    [row] = actions(msg)
    approve, edit, reject = row["elements"]
    # Each button carries the item and the digest of this card: a click counts for it only.
    assert (approve["action_id"], approve["style"], approve["value"]) == (
        "pizza_approve",
        "primary",
        f"it1:{card_digest(item)}",
    )
    assert edit["action_id"] == "pizza_edit" and "style" not in edit
    assert edit["value"] == reject["value"] == approve["value"]
    assert (reject["action_id"], reject["style"]) == ("pizza_reject", "danger")
    assert reject["confirm"]["confirm"]["text"] == "Reject"
    assert msg.text == "sales wants to run crm.send_email"


def test_long_values_are_cut_with_a_link_and_the_message_stays_within_slack_limits() -> None:
    long_args = {"body": "x" * 5000, **{f"k{i}": "y" * 200 for i in range(40)}}
    msg = blocks.message(action(args=long_args), base_url=BASE)
    for block in msg.blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= 3000
    shown = text_of(msg)
    assert "x" * 280 + "…" in shown and "x" * 281 not in shown
    assert f"<{BASE}/items/it1|see all>" in shown
    assert "more arguments on the web page" in shown


def test_decided_actions_lose_their_buttons_and_say_who_how_and_when() -> None:
    approved = action(
        status=ItemStatus.APPROVED, decided_by="U1", decided_via="slack", decided_at=AT
    )
    msg = blocks.message(approved, base_url=BASE)
    assert actions(msg) == []
    assert "✅ Approved by <@U1> via slack at <!date^" in text_of(msg)

    edited = action(
        status=ItemStatus.EDITED,
        decided_by="ann@example.com",
        decided_via="email",
        decided_at=AT,
        final_args={**ARGS, "copies": 3},
    )
    shown = text_of(blocks.message(edited, base_url=BASE))
    assert "✏️ Edited by ann@example.com via email" in shown
    assert "*Edited arguments*" in shown and "*copies*: 3" in shown

    rejected = action(
        status=ItemStatus.REJECTED,
        decided_by="owner",
        decided_via="web",
        decided_at=AT,
        reason="not <now>",
    )
    assert "❌ Rejected by owner via web at " in text_of(blocks.message(rejected, base_url=BASE))
    assert ": not &lt;now&gt;" in text_of(blocks.message(rejected, base_url=BASE))

    expired = action(
        status=ItemStatus.EXPIRED, decided_by="timeout", decided_via="timer", decided_at=AT
    )
    assert "⌛ Expired" in text_of(blocks.message(expired, base_url=BASE))
    closed = action(
        status=ItemStatus.CANCELLED, decided_by="the run ended", decided_via="engine", decided_at=AT
    )
    closed_msg = blocks.message(closed, base_url=BASE)
    assert "Closed: the run ended" in text_of(closed_msg) and actions(closed_msg) == []


def test_a_stale_click_is_told_who_decided() -> None:
    approved = action(
        status=ItemStatus.APPROVED, decided_by="U1", decided_via="slack", decided_at=AT
    )
    assert blocks.already_text(approved).startswith(
        "Already approved by <@U1> via slack at <!date^"
    )
    assert blocks.already_text(approved, plain=True) == (
        "Already approved by U1 via slack at 2026-11-29 12:30 UTC."
    )


def test_a_budget_item_can_be_extended_or_stopped_but_not_edited() -> None:
    budget = action(kind=ItemKind.BUDGET, tool=None, schema=None, args={"steps": 10})
    msg = blocks.message(budget, base_url=BASE)
    [row] = actions(msg)
    assert [e["action_id"] for e in row["elements"]] == ["pizza_approve", "pizza_reject"]
    assert row["elements"][0]["text"]["text"] == "Extend"
    assert "sales: budget reached" in text_of(msg)


def test_an_unread_item_shows_the_result_and_links_the_run() -> None:
    done = Item(
        id="u1",
        run_id="run1",
        skill="sales",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="sales finished",
        body="Mailed Ann.",
        created_at=AT,
    )
    msg = blocks.message(done, base_url=BASE + "/", outcome=RunStatus.DONE)
    shown = text_of(msg)
    assert "✅ sales finished" in shown and "Mailed Ann." in shown
    assert f"<{BASE}/runs/run1|Open the run on the web page>" in shown
    assert actions(msg) == []
    failed = replace(done, title="sales failed", body="x" * 4000)
    shown = text_of(blocks.message(failed, base_url=BASE, outcome=RunStatus.FAILED))
    assert "⚠️ sales failed" in shown and "the result is cut here" in shown


def test_an_unread_items_mark_is_how_its_run_ended_whatever_its_title_says() -> None:
    note = Item(
        id="u1",
        run_id="run1",
        skill="finished",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="finished failed",  # a skill named "finished" that failed
        body="boom",
        created_at=AT,
    )
    run = Run(
        id="run1",
        skill="finished",
        status=RunStatus.FAILED,
        input="go",
        trigger="api",
        created_at=AT,
        updated_at=AT,
        finished_at=AT,
    )
    assert blocks.note_outcome(note, run) is RunStatus.FAILED
    assert "⚠️ finished failed" in text_of(
        blocks.message(note, base_url=BASE, outcome=blocks.note_outcome(note, run))
    )
    liar = replace(note, title="sales finished")
    assert "⚠️ sales finished" in text_of(blocks.message(liar, base_url=BASE, outcome=run.status))
    # A follow-up queued the run again: this note's outcome is not the run's current state.
    again = replace(run, status=RunStatus.QUEUED, finished_at=None)
    assert blocks.note_outcome(note, again) is None
    ended_anew = replace(run, status=RunStatus.DONE, finished_at=AT + timedelta(minutes=5))
    assert blocks.note_outcome(note, ended_anew) is None
    assert "ℹ️ finished failed" in text_of(blocks.message(note, base_url=BASE))


def _inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


def test_the_edit_modal_is_built_from_the_schema_and_prefilled() -> None:
    ref = ModalRef("it1", "C123", "171.1")
    view = blocks.edit_modal(action(), ref=ref, base_url=BASE)
    assert view["callback_id"] == "pizza_edit_view" and view["type"] == "modal"
    fields = form_fields(SCHEMA, ARGS)
    assert ModalRef.loads(view["private_metadata"]) == replace(
        ref, fields=blocks.fields_digest(fields)
    )
    assert len(view["title"]["text"]) <= 24 and len(view["submit"]["text"]) <= 24
    inputs = _inputs(view)
    assert inputs[B["to"]]["element"] == {
        "type": "plain_text_input",
        "action_id": "value",
        "initial_value": "ann@example.com",
    }
    assert inputs[B["to"]]["optional"] is False and inputs[B["to"]]["hint"]["text"] == "Recipient."
    assert inputs[B["body"]]["element"]["multiline"] is True
    assert inputs[B["priority"]]["element"]["type"] == "static_select"
    assert inputs[B["priority"]]["element"]["initial_option"]["value"] == "normal"
    assert inputs[B["priority"]]["optional"] is True
    copies = inputs[B["copies"]]["element"]
    assert copies == {
        "type": "number_input",
        "action_id": "value",
        "is_decimal_allowed": False,
        "initial_value": "2",
    }
    assert "from 1 to 10" in inputs[B["copies"]]["hint"]["text"]
    assert inputs[B["ratio"]]["element"]["is_decimal_allowed"] is True
    receipt = inputs[B["receipt"]]["element"]
    assert receipt["type"] == "checkboxes" and receipt["initial_options"] == receipt["options"]
    tags = inputs[B["tags"]]["element"]
    assert tags["multiline"] is True and json.loads(tags["initial_value"]) == ["quote", "q4"]
    cc = inputs[B["cc"]]
    assert cc["optional"] is True and "initial_value" not in cc["element"]


def _state(view: dict[str, Any], **typed: Any) -> dict[str, Any]:
    """What Slack sends back for an untouched modal, with `typed` values changed."""
    values: dict[str, Any] = {}
    for block_id, block in _inputs(view).items():
        element = block["element"]
        name = NAMES[block_id]
        kind = element["type"]
        if kind == "checkboxes":
            chosen = typed.get(name, element.get("initial_options", []))
            values[block_id] = {"value": {"type": kind, "selected_options": chosen}}
        elif kind == "static_select":
            value = typed.get(name, (element.get("initial_option") or {}).get("value"))
            option = (
                None
                if value is None
                else {"text": {"type": "plain_text", "text": value}, "value": value}
            )
            values[block_id] = {"value": {"type": kind, "selected_option": option}}
        else:
            values[block_id] = {
                "value": {"type": kind, "value": typed.get(name, element.get("initial_value"))}
            }
    return values


def test_an_untouched_modal_gives_back_the_proposed_arguments() -> None:
    item = action()
    view = blocks.edit_modal(item, ref=ModalRef("it1"), base_url=BASE)
    fields = form_fields(SCHEMA, ARGS)
    raw = blocks.form_values(_state(view), fields)
    args, errors = coerce_form(SCHEMA, raw)
    assert errors == {}
    assert args == ARGS


def test_changed_values_are_coerced_and_errors_map_to_blocks() -> None:
    view = blocks.edit_modal(action(), ref=ModalRef("it1"), base_url=BASE)
    fields = form_fields(SCHEMA, ARGS)
    raw = blocks.form_values(
        _state(view, copies="50", receipt=[], to=None, priority="pizza:none"), fields
    )
    assert raw["receipt"] is False and raw["priority"] is None
    args, errors = coerce_form(SCHEMA, raw)
    assert args["receipt"] is False and "priority" not in args  # empty optional: tool default
    mapped = blocks.form_errors(errors, fields)
    assert set(mapped) == {B["copies"], B["to"]}
    assert blocks.form_errors({"": "something is off"}, fields) == {B["to"]: "something is off"}


def test_a_value_too_long_for_slack_is_kept_and_linked_not_cut() -> None:
    long_body = "word " * 1000
    item = action(args={**ARGS, "body": long_body})
    view = blocks.edit_modal(item, ref=ModalRef("it1"), base_url=BASE)
    assert B["body"] not in _inputs(view)
    assert "too long to edit in Slack" in json.dumps(view)
    fields = form_fields(SCHEMA, item.args or {})
    raw = blocks.form_values(_state(view, to="bob@example.com"), fields)
    args, errors = coerce_form(SCHEMA, raw)
    assert errors == {} and args["body"] == long_body and args["to"] == "bob@example.com"
    # An error about the kept field shows on a field people can see.
    assert blocks.form_errors({"body": "too long"}, fields) == {B["to"]: "body: too long"}


def test_a_proposed_value_slack_would_refuse_is_not_prefilled() -> None:
    item = action(args={**ARGS, "copies": "many", "priority": "urgent"})
    inputs = _inputs(blocks.edit_modal(item, ref=ModalRef("it1"), base_url=BASE))
    assert "initial_value" not in inputs[B["copies"]]["element"]
    assert "initial_option" not in inputs[B["priority"]]["element"]


def test_the_reject_modal_asks_for_an_optional_reason() -> None:
    view = blocks.reject_modal(action(), ref=ModalRef("it1", "C1"))
    assert view["callback_id"] == "pizza_reject_view"
    [reason] = _inputs(view).values()
    assert reason["optional"] is True and reason["element"]["multiline"] is True
    state = {"reason": {"value": {"type": "plain_text_input", "value": "  not now "}}}
    assert blocks.reason_value(state) == "not now"
    assert (
        blocks.reason_value({"reason": {"value": {"type": "plain_text_input", "value": None}}})
        == ""
    )
