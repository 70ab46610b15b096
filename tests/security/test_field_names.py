"""A property called `address.city` and the `city` inside `address` are two fields.

Edit forms flatten nested objects into dotted names, so both arguments used to become the
field `address.city`: the web page showed two inputs with one name and ran the tool with
one value in both places, and an email edit line `address.city: X` set both. Now a dot
inside a property's own name is written `address\\.city`, and each channel sets each
argument on its own: what a person typed for one never reaches the other. (The Slack modal
is covered in tests/test_slack_modals.py, through the Bolt app.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from pizzabot.agent.addresses import EmailTarget
from pizzabot.agent.events import NewEvent, ToolRequest
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.channels.web.forms import PREFIX
from tests.peers.email_bot import USERS, EmailBot, reply_to, send
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.web import Form, WebApp, csrf_of

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "address.city": {"type": "string"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        "to": {"type": "string"},
    },
    "required": ["to"],
}
PROPOSED = {"address.city": "Lyon", "address": {"city": "Paris"}, "to": "ann@example.com"}
EDITED = {"address.city": "Nice", "address": {"city": "Brest"}, "to": "ann@example.com"}


async def test_the_web_form_edits_the_dotted_property_and_the_nested_one_apart(
    tmp_path: Path,
) -> None:
    async with WebApp(tmp_path) as web:
        item = await web.action_item(schema=SCHEMA, args=PROPOSED)
        async with web.client(logged_in=True) as c:
            page = await c.get(f"/items/{item.id}")
            form = Form(page.text)
            literal, nested = PREFIX + "address\\.city", PREFIX + "address.city"
            assert form.controls[literal]["value"] == "Lyon"
            assert form.controls[nested]["value"] == "Paris"
            posted = {
                "csrf": csrf_of(page.text),
                "decision": "edit",
                literal: "Nice",
                nested: "Brest",
                PREFIX + "to": "ann@example.com",
            }
            r = await c.post(f"/items/{item.id}", data=posted)
            assert r.status_code == 303, r.text
        decided = await web.store.get_item(item.id)
        assert decided.status is ItemStatus.EDITED
        assert decided.final_args == EDITED


# --- email ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


async def _dotted_action(bot: EmailBot) -> Item:
    """An action item with the two look-alike arguments, mailed to the approver."""
    now = bot.ctx.clock()
    skill = bot.skills.all()[0]
    run = await bot.store.create_run(
        run_id=bot.ctx.ids(), skill=skill.name, input="ship it", trigger="api", now=now
    )
    await bot.store.set_status(run.id, RunStatus.RUNNING, lease=None, now=now)
    item = Item(
        id=bot.ctx.ids(),
        run_id=run.id,
        skill=skill.name,
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title=f"{skill.name} wants to run crm.ship",
        body="I will ship to Lyon.",
        created_at=now,
        call_id=f"call-{uuid.uuid4().hex[:6]}",
        tool="crm.ship",
        args=dict(PROPOSED),
        schema=SCHEMA,
        secret=bot.ctx.secrets(),
    )
    await bot.store.create_item(
        item,
        targets=[EmailTarget(a) for a in skill.deliver.email],
        lease=None,
        now=now,
        run_status=RunStatus.WAITING,
        events=[NewEvent(ToolRequest(item_id=item.id, call_id=item.call_id or ""))],
    )
    bot.dispatcher.wake()
    return item


def _text(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


async def test_an_email_edit_line_names_the_dotted_property_apart_from_the_nested_one(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await _dotted_action(bot)
        got = await bot.mail_for(item.id)
        # The mail lists the fields as an edit line names them.
        assert "address\\.city (text, optional)" in _text(got)
        assert "address.city (text, optional)" in _text(got)

        await send(mail, reply_to(got, "edit\naddress\\.city: Nice\naddress.city: Brest"))

        assert await bot.next_outcome() == "decided: edit"
        decided = await bot.store.get_item(item.id)
        assert decided.final_args == EDITED


async def test_an_email_edit_of_one_of_the_two_leaves_the_other_as_proposed(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await _dotted_action(bot)
        got = await bot.mail_for(item.id)

        await send(mail, reply_to(got, "edit\naddress.city: Brest"))

        assert await bot.next_outcome() == "decided: edit"
        decided = await bot.store.get_item(item.id)
        assert decided.final_args == {**PROPOSED, "address": {"city": "Brest"}}
