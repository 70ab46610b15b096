"""A number too large to convert is a field error on every path, never a frozen loop or an
escaped exception.

``int(Decimal("1e500000"))`` takes seconds of CPU and Python refuses to print an int of more
than 4300 digits, so an edit that typed one used to block the server and then crash in the
schema check (a mail was retried three times). Each story sends such a number the way a
person would — the API, the CLI, a Slack modal, the web form, an email reply — and expects
the item to stay pending with a message next to the field, and the server to go on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from pizzabot.agent.model import ItemStatus
from pizzabot.channels.web.forms import PREFIX
from tests.peers.email_bot import USERS, EmailBot, reply_to, send
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.slack_api import (
    SlackApi,
    filled_values,
    http_mode_env,
    post_interaction,
    view_submission,
)
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise
from tests.peers.web import Form, WebApp, csrf_of
from tests.test_cli import cli
from tests.test_slack_scenarios import (
    APPROVER,
    SECRET,
    click,
    events_url,
    get_item,
    posted_item,
)

HUGE = "1e500000"
OUT_OF_RANGE = "is out of range"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(slack: SlackApi, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """One server with Slack in HTTP mode: the API, the CLI and the modal meet the same code."""
    env = http_mode_env(slack.url, SECRET)
    skill = {"deliver": {"slack": "C123"}, "approvers": {"slack": [APPROVER]}}
    root: Path = tmp_path_factory.mktemp("numbers")
    async with Stack(root, script=send_then_summarise, skill=skill, env=env) as st:
        yield st


async def decide_raw(st: Stack, item_id: str, body: str) -> Any:
    """POST a decision body as typed: JSON a client library would refuse to write."""
    async with st.client() as c:
        return await c.post(
            f"/api/items/{item_id}/decision",
            content=body.encode(),
            headers={"Content-Type": "application/json"},
        )


@pytest.mark.asyncio(loop_scope="module")
async def test_an_api_edit_with_a_number_out_of_range_is_a_field_error(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, _ = await posted_item(st, slack)
    args = json.dumps({**item["args"], "copies": 0})

    for copies in (HUGE, "NaN", "-Infinity", "1e309"):
        r = await decide_raw(
            st,
            item["id"],
            '{"decision": "edit", "args": '
            + args.replace('"copies": 0', f'"copies": {copies}')
            + "}",
        )
        assert r.status_code == 422, (copies, r.text)
        # Refused as the body is read, by its place in the body.
        assert OUT_OF_RANGE in r.json()["detail"]["errors"]["args.copies"], (copies, r.text)

    literal = "7" * 5000  # past Python's 4300-digit limit for int <-> str
    r = await decide_raw(
        st,
        item["id"],
        '{"decision": "edit", "args": ' + args.replace('"copies": 0', f'"copies": {literal}') + "}",
    )
    assert r.status_code == 422 and "out of range" in r.text, r.text

    assert (await get_item(st, item["id"]))["status"] == "pending"
    ok = await st.decide(item["id"], "edit", args={**item["args"], "copies": 2})
    assert ok.status_code == 200 and ok.json()["final_args"]["copies"] == 2


@pytest.mark.asyncio(loop_scope="module")
async def test_the_cli_prints_the_field_error_for_a_number_out_of_range(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, _ = await posted_item(st, slack)

    refused = await asyncio.to_thread(cli, st, "edit", item["id"], "--set", f"copies={HUGE}")

    assert refused.returncode == 1
    assert "422" in refused.stderr and "copies" in refused.stderr
    assert OUT_OF_RANGE in refused.stderr
    assert (await get_item(st, item["id"]))["status"] == "pending"


@pytest.mark.asyncio(loop_scope="module")
async def test_a_slack_modal_with_a_number_out_of_range_shows_the_error_inline(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, post = await posted_item(st, slack)
    clicked = click(item["id"], post, "pizza_edit")
    assert (await post_interaction(events_url(st), clicked, secret=SECRET)).status_code == 200
    [opened] = await slack.wait_for(
        "views.open", lambda c: c.args.get("trigger_id") == clicked["trigger_id"]
    )
    view = opened.args["view"]
    # The one whole-number input of send_email is "copies".
    [copies] = [
        b["block_id"]
        for b in view["blocks"]
        if b["type"] == "input" and b["element"]["type"] == "number_input"
    ]
    values = filled_values(view, **{copies: "1e1000000"})
    submitted = view_submission(view=view, user=APPROVER, values=values)

    r = await post_interaction(events_url(st), submitted, secret=SECRET)

    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["response_action"] == "errors"
    assert OUT_OF_RANGE in answer["errors"][copies]
    assert (await get_item(st, item["id"]))["status"] == "pending"


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string"},
        "copies": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number"},
    },
    "required": ["to"],
}


@pytest.mark.parametrize(("field", "typed"), [("copies", HUGE), ("ratio", "1e1000000")])
async def test_the_web_form_shows_a_number_out_of_range_next_to_its_field(
    tmp_path: Path, field: str, typed: str
) -> None:
    async with WebApp(tmp_path) as web:
        item = await web.action_item(schema=SCHEMA, args={"to": "ann@example.com", "copies": 1})
        async with web.client(logged_in=True) as c:
            page = await c.get(f"/items/{item.id}")
            posted = {
                "csrf": csrf_of(page.text),
                PREFIX + "to": "ann@example.com",
                PREFIX + "copies": "1",
                PREFIX + "ratio": "",
                PREFIX + field: typed,
            }

            answer = await c.post(f"/items/{item.id}/edit", data=posted)

            assert answer.status_code == 422
            again = Form(answer.text)
            assert again.controls[PREFIX + field]["value"] == typed
            assert any(OUT_OF_RANGE in e for e in again.errors), again.errors
        assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


@pytest.mark.mail
@pytest.mark.parametrize(
    ("edit", "outcome"),
    [
        ("edit\ncopies: 1e1000000", "edit refused: copies"),
        ('edit\n{"copies": 1e1000000}', "edit refused: "),
        ('edit\n{"copies": ' + "7" * 5000 + "}", "edit refused: "),
    ],
)
async def test_an_email_edit_with_a_number_out_of_range_is_answered_with_the_error(
    mail: MailServer, tmp_path: Path, edit: str, outcome: str
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()
        got = await bot.mail_for(item.id)
        bad = reply_to(got, edit)

        await send(mail, bad)

        assert await bot.next_outcome() == outcome
        assert (await bot.store.get_item(item.id)).status is ItemStatus.PENDING
        [answer] = await bot.answers_to(str(bad["Message-ID"]))
        text = answer.get_body(("plain",))
        assert isinstance(text, EmailMessage)
        assert OUT_OF_RANGE in text.get_content()
