"""Undo on a `notify` FYI from Slack and from mail, end to end: a real server, Slack's Web
API played by the recorder (signed clicks sent to the Bolt endpoint), and a real SMTP + IMAP
server. The FYI's message has an Undo button and its mail a one-time Undo link; whichever is
used first runs the compensating call, every copy then says how it went, and the other is
told it was undone already."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.test_email_e2e import ALICE, ALICE_PW, item_mail, text_of
from tests.e2e.test_email_e2e import env as mail_env
from tests.e2e.test_notify_undo import contacts_skill, deleted, fyi_of
from tests.e2e.test_rules import call_from_input
from tests.peers import mcp_contacts
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.slack_api import (
    Call,
    SlackApi,
    block_actions,
    button_value,
    http_mode_env,
    post_interaction,
)
from tests.peers.stack import Stack

pytestmark = pytest.mark.mail

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
APPROVER = "U1"


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


def skill(tools_log: Path) -> dict[str, Any]:
    return {
        **contacts_skill(tools_log),
        "approvers": {"slack": [APPROVER], "email": [ALICE]},
        "deliver": {"slack": "C123", "email": [ALICE]},
    }


async def posted(slack: SlackApi, item_id: str) -> Call:
    """The FYI's Slack message: the one whose Undo button names the item."""

    def has_undo(call: Call) -> bool:
        return item_id in json.dumps(call.args.get("blocks") or [])

    [post] = await slack.wait_for("chat.postMessage", has_undo)
    return post


async def click_undo(st: Stack, post: Call, *, user: str = APPROVER) -> None:
    click = block_actions(
        action_id="undo",
        value=button_value(post, "undo"),
        user=user,
        channel="C123",
        message_ts=str(post.answer.get("ts") or "1700000000.000100"),
    )
    r = await post_interaction(f"{st.server.url}/slack/events", click, secret=SECRET)
    assert r.status_code == 200, r.text


async def note_to(slack: SlackApi, user: str, says: str) -> str:
    def found(call: Call) -> bool:
        return call.args.get("user") == user and says in str(call.args.get("text"))

    [note] = await slack.wait_for("chat.postEphemeral", found)
    return str(note.args["text"])


def undo_link_in(text: str, server_url: str) -> str:
    [link] = [w for w in text.split() if "/mail/u/" in w]
    return link.replace("http://pizzabot.test", server_url)


async def test_undo_from_slack_then_the_mail_link_says_it_was_undone(
    mail: MailServer, tmp_path: Path
) -> None:
    async with SlackApi() as slack:
        env = {**mail_env(mail), **http_mode_env(slack.url, SECRET)}
        async with Stack(
            tmp_path, script=call_from_input, skill=skill(tmp_path / "tools.jsonl"), env=env
        ) as st:
            fyi = await fyi_of(st, "ann@example.com")
            post = await posted(slack, fyi["id"])
            assert button_value(post, "undo") == fyi["id"]
            card = await item_mail(mail, fyi["id"])
            link = undo_link_in(text_of(card), st.server.url)

            # Someone who may not decide the tool's cards cannot undo it.
            await click_undo(st, post, user="U999")
            assert "may not undo" in await note_to(slack, "U999", "Not undone")
            assert deleted(st) == []

            await click_undo(st, post)
            said = await note_to(slack, APPROVER, "Undone by U1 via slack")
            contact = mcp_contacts.contact_id("ann@example.com")
            assert f"deleted {contact}" in said
            assert deleted(st) == [{"id": contact, "email": "ann@example.com"}]

            # Every copy says so: the Slack message, and a notice in the mail's thread.
            await slack.wait_for(
                "chat.update", lambda c: "Undone by U1 via slack" in json.dumps(c.args)
            )
            notice = await mail.wait_for_mail(
                "alice",
                ALICE_PW,
                lambda m: m["X-Pizzabot-Item"] == fyi["id"] and m["In-Reply-To"] is not None,
                timeout=30,
            )
            assert "Undone by U1 via slack" in text_of(notice)

            # The mail's link, opened now, says it was undone already; nothing runs again.
            async with httpx.AsyncClient(timeout=30) as c:
                page = await c.get(link)
                assert page.status_code == 409 and "Undone by U1 via slack" in page.text
                again = await c.post(link)
                assert again.status_code == 409 and "already undone by U1" in again.text
            assert len(deleted(st)) == 1


async def test_undo_from_the_mail_link_updates_the_slack_message(
    mail: MailServer, tmp_path: Path
) -> None:
    async with SlackApi() as slack:
        env = {**mail_env(mail), **http_mode_env(slack.url, SECRET)}
        async with Stack(
            tmp_path, script=call_from_input, skill=skill(tmp_path / "tools.jsonl"), env=env
        ) as st:
            fyi = await fyi_of(st, "bob@example.com")
            post = await posted(slack, fyi["id"])
            link = undo_link_in(text_of(await item_mail(mail, fyi["id"])), st.server.url)
            async with httpx.AsyncClient(timeout=30) as c:
                # Opening the link (a mail scanner does) undoes nothing.
                confirm = await c.get(link)
                assert confirm.status_code == 200 and "Undo this as" in confirm.text
                assert deleted(st) == []
                done = await c.post(link)
                assert done.status_code == 200, done.text
                assert f"Undone by {ALICE} via email" in done.text
                used = await c.post(link)
                assert used.status_code == 410
            assert len(deleted(st)) == 1
            await slack.wait_for(
                "chat.update", lambda c: f"Undone by {ALICE} via email" in json.dumps(c.args)
            )
            await click_undo(st, post)
            assert "already undone" in await note_to(slack, APPROVER, "Nothing done")
            assert len(deleted(st)) == 1
