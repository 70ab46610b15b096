"""A request from an agent Pizza Bot does not run reads as that agent's request on every
channel: its tool by the requester's own name (never "on server …": `shell.run` is not an
MCP server's tool), who asked, and no "run of the skill's model" wording. A run's own call
still names its tool's server."""

from __future__ import annotations

import email
import email.policy
from dataclasses import replace
from datetime import UTC, datetime
from email.message import EmailMessage

from pizzabot.agent.model import REQUEST_CALL, Box, Item, ItemKind, ItemStatus, Run, RunStatus
from pizzabot.channels.chat.card import card_of
from pizzabot.channels.email.compose import MailIdentity, Thread, item_mail
from pizzabot.channels.http.answers import item_out
from pizzabot.channels.slack.cards import message

AT = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
BODY = "Claude Code (PreToolUse, session s1) asks to run a shell command.\nWorking directory: /srv/shop"
REQUEST = Item(
    id="i1",
    run_id="r1",
    skill="approvals",
    box=Box.ACTION,
    kind=ItemKind.TOOL,
    status=ItemStatus.PENDING,
    title="Claude Code: rm -rf build",
    body=BODY,
    created_at=AT,
    call_id=REQUEST_CALL,
    tool="shell.run",
    args={"command": "rm -rf build", "run_in_background": False},
    requested_by="token:laptop-hook",
)
RUN = Run(
    id="r1",
    skill="approvals",
    status=RunStatus.WAITING,
    input="Claude Code: rm -rf build",
    trigger="request",
    created_at=AT,
    updated_at=AT,
)


def mail_text(item: Item) -> str:
    msg = item_mail(
        item,
        RUN,
        identity=MailIdentity(address="bot@example.test"),
        to="ann@example.test",
        message_id="<m1@example.test>",
        thread=Thread("s"),
        can_decide=False,
        token=None,
        links=None,
        now=AT,
    )
    again = email.message_from_bytes(msg.as_bytes(), policy=email.policy.default)
    assert isinstance(again, EmailMessage)
    plain = again.get_body(("plain",))
    assert isinstance(plain, EmailMessage)
    return str(plain.get_content()).replace("\r\n", "\n")


def test_a_request_names_its_tool_and_who_asked_on_every_channel() -> None:
    assert REQUEST.requested and REQUEST.tool_place == ("shell.run", None)
    api = item_out(REQUEST)
    assert api.requested and api.server is None and api.tool == "shell.run"

    slack = str(message(REQUEST, base_url="http://pizza.example").blocks)
    assert "Tool `shell.run`" in slack and "on server" not in slack
    assert "Requested by token:laptop-hook" in slack

    chat = card_of(REQUEST, base_url="http://pizza.example")
    assert "🔧 Tool shell.run" in chat.facts and "🙋 Requested by token:laptop-hook" in chat.facts

    text = mail_text(REQUEST)
    assert text.startswith("token:laptop-hook asks: Claude Code: rm -rf build\n\nThe request:")
    assert "What the run is doing" not in text and "wants to run" not in text


def test_a_runs_own_call_still_names_its_server() -> None:
    own = replace(REQUEST, call_id="c1", tool="crm.send_email", requested_by=None)
    assert not own.requested and own.tool_place == ("send_email", "crm")
    assert item_out(own).server == "crm"
    slack = str(message(own, base_url="http://pizza.example").blocks)
    assert "Tool `send_email` on server `crm`" in slack
    assert "What the run is doing:" in mail_text(own)
