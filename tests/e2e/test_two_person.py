"""Two-person approval end to end: a real server process with Slack (the local Web API
recorder, correctly signed interaction payloads) and email (the real SMTP + IMAP peer), and
a tool that needs two of three people.

Alice has a Slack account and a mailbox, Bob only Slack, Carol only a mailbox. Alice on
Slack and Alice by email are one person: her second approval is refused, not counted. Every
copy (the Slack card, the mails, the web page, the API) shows the count and who.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from typing import Any

import aiosmtplib
import httpx
import pytest
import pytest_asyncio

from tests.e2e.test_email_e2e import env as mail_env
from tests.peers.email_bot import reply_to
from tests.peers.mailserver import MailServer
from tests.peers.required import require
from tests.peers.server import TOKEN
from tests.peers.slack_api import (
    Call,
    SlackApi,
    block_actions,
    button_value,
    http_mode_env,
    post_interaction,
)
from tests.peers.stack import Stack
from tests.peers.stories import EMAIL, send_then_summarise
from tests.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.mail]

SECRET = "5a0e3c7f1b2d4e6f8a9b0c1d2e3f4a5b"
ALICE, CAROL = "alice@example.test", "carol@example.test"
USERS = {"bot": "bot-pw", "alice": "alice-pw", "carol": "carol-pw"}
ALICE_SLACK, BOB_SLACK = "U0ALICE", "U0BOB"

SKILL: dict[str, Any] = {
    "people": {
        "alice": {"slack": ALICE_SLACK, "email": ALICE},
        "bob": {"slack": BOB_SLACK},
        "carol": {"email": CAROL},
    },
    "approvers": ["alice", "bob", "carol"],
    "deliver": {"slack": "C2P", "email": [ALICE, CAROL]},
    "tools": {"crm.send_email": {"policy": "ask", "approvals": {"required": 2}}},
}


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    slack: SlackApi, mail: MailServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    env = {**mail_env(mail), **http_mode_env(slack.url, SECRET)}
    root = tmp_path_factory.mktemp("two-person")
    async with Stack(root, script=send_then_summarise, skill=SKILL, env=env) as st:
        yield st


# -- the people's side ---------------------------------------------------------------------


async def card(st: Stack, slack: SlackApi, text: str) -> tuple[dict[str, Any], Call]:
    """Start a run; its action item and the item's Slack card."""
    run = await st.start_run("test", text)
    item = await st.wait_item(run["id"])
    [post] = await slack.wait_for("chat.postMessage", lambda c: item["id"] in blocks(c))
    return item, post


def blocks(call: Call) -> str:
    return str(call.args.get("blocks") or "")


async def click_approve(st: Stack, item: dict[str, Any], post: Call, user: str) -> None:
    """A click on the Approve button of the card as `post` (a post or an update) shows it."""
    value = button_value(post, "pizza_approve")
    assert value.partition(":")[0] == item["id"]
    payload = block_actions(
        action_id="pizza_approve",
        value=value,
        user=user,
        channel=str(post.answer["channel"]),
        message_ts=str(post.answer["ts"]),
    )
    r = await post_interaction(f"{st.server.url}/slack/events", payload, secret=SECRET)
    assert r.status_code == 200, r.text


async def card_shows(slack: SlackApi, post: Call, text: str) -> Call:
    """The card's latest update once it shows `text`."""
    ts = post.answer["ts"]
    calls = await slack.wait_for(
        "chat.update", lambda c: c.args.get("ts") == ts and text in blocks(c)
    )
    return calls[-1]


def plain(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


async def item_mail(mail: MailServer, user: str, item_id: str) -> EmailMessage:
    return await mail.wait_for_mail(
        user,
        USERS[user],
        lambda m: m["X-Pizzabot-Item"] == item_id and m["Reply-To"] is not None,
        timeout=30,
    )


async def mail_saying(mail: MailServer, user: str, item_id: str, text: str) -> EmailMessage:
    return await mail.wait_for_mail(
        user,
        USERS[user],
        lambda m: m["X-Pizzabot-Item"] == item_id and text in plain(m),
        timeout=30,
    )


async def answer(mail: MailServer, got: EmailMessage, text: str, *, sender: str) -> EmailMessage:
    reply = reply_to(got, text, sender=sender)
    await aiosmtplib.send(reply, hostname=mail.host, port=mail.smtp_port)
    return reply


async def item_now(st: Stack, item_id: str) -> dict[str, Any]:
    async with st.client() as c:
        r = await c.get(f"/api/items/{item_id}")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


async def item_becomes(st: Stack, item_id: str, status: str) -> dict[str, Any]:
    async def there() -> dict[str, Any] | None:
        item = await item_now(st, item_id)
        return item if item["status"] == status else None

    return await eventually(there, what=f"item {item_id} to be {status}", context=st.server.log)


async def audit_of(st: Stack, item_id: str) -> list[tuple[str, str, str]]:
    """(action, actor, channel) of the item's audit entries, oldest first."""
    async with st.client() as c:
        entries = (await c.get("/api/audit")).json()["items"]
    return [
        (e["action"], e["actor"], e["channel"])
        for e in reversed(entries)
        if e["item_id"] == item_id
    ]


async def web_page(st: Stack, path: str) -> str:
    async with httpx.AsyncClient(base_url=st.server.url) as c:
        login = await c.get("/login", params={"token": TOKEN})
        assert login.status_code == 303, login.text
        page = await c.get(path)
        assert page.status_code == 200, page.text
        return " ".join(page.text.split())


def cli(st: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """`pizzabot` in a terminal: a client of the server's API, as the owner."""
    env = {**os.environ, "PIZZABOT_URL": st.server.url, "PIZZABOT_API_TOKEN": TOKEN}
    run = [sys.executable, "-m", "pizzabot.bot.main", *args]
    return subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)


def sent(st: Stack) -> list[str]:
    """To whom the test CRM really sent mail."""
    return [c["args"]["to"] for c in st.tool_calls() if c["tool"] == "send_email"]


# -- the stories ---------------------------------------------------------------------------


async def test_two_of_three_across_slack_and_email_counts_alice_once(
    stack: Stack, slack: SlackApi, mail: MailServer
) -> None:
    st = stack
    item, post = await card(st, slack, "mail Ann the quote")
    assert "0 of 2 approved" in blocks(post)
    alice_mail = await item_mail(mail, "alice", item["id"])
    carol_mail = await item_mail(mail, "carol", item["id"])
    assert "Approvals: 0 of 2 approved" in plain(carol_mail)

    # Alice approves on Slack: counted, and every copy shows it.
    await click_approve(st, item, post, ALICE_SLACK)
    await card_shows(slack, post, "1 of 2 approved: alice via Slack")
    pending = await item_now(st, item["id"])
    assert pending["status"] == "pending"
    assert pending["risk"]["approved"] == ["alice via Slack"]
    assert pending["risk"]["approvals_required"] == 2
    notice = await mail_saying(mail, "carol", item["id"], "1 of 2 approved: alice via Slack")
    assert "ann@example.com" in plain(notice)  # what it would run with
    assert "1 of 2 approved: alice via Slack" in await web_page(st, f"/items/{item['id']}")

    # Alice again, on Slack and then by email: she is one person, told so, not counted.
    await click_approve(st, item, post, ALICE_SLACK)
    [told] = await slack.wait_for("chat.postEphemeral", lambda c: c.args.get("user") == ALICE_SLACK)
    assert "alice approved this already" in told.args["text"]
    reply = await answer(mail, alice_mail, "approve", sender=f"Alice <{ALICE}>")
    refused = await mail.wait_for_mail(
        "alice", USERS["alice"], lambda m: m["In-Reply-To"] == reply["Message-ID"], timeout=30
    )
    assert "Not counted: alice approved this already" in plain(refused)
    assert (await item_now(st, item["id"]))["risk"]["approved"] == ["alice via Slack"]

    # Carol approves by email: the second person, so the call runs, once.
    await answer(mail, carol_mail, "approve", sender=f"Carol <{CAROL}>")
    decided = await item_becomes(st, item["id"], "approved")
    assert (decided["decided_by"], decided["decided_via"]) == (CAROL, "email")
    assert decided["risk"]["approved"] == ["alice via Slack", "carol via email"]
    await st.wait_run(item["run_id"], {"done"})
    assert sent(st).count("ann@example.com") == 1
    final = await card_shows(slack, post, "2 of 2 approved: alice via Slack, carol via email")
    assert "pizza_approve" not in blocks(final)  # decided: no buttons left

    trail = await audit_of(st, item["id"])
    assert [t for t in trail if t[0] == "approval"] == [
        ("approval", ALICE_SLACK, "slack"),
        ("approval", CAROL, "email"),
    ]
    refusals = [t for t in trail if t[0] == "approval_refused"]
    assert refusals == [
        ("approval_refused", ALICE_SLACK, "slack"),
        ("approval_refused", ALICE, "email"),
    ]
    assert ("decision", CAROL, "email") in trail


async def test_one_reject_ends_it_with_its_reason(stack: Stack, slack: SlackApi) -> None:
    st = stack
    before = len(sent(st))
    item, post = await card(st, slack, "mail Ann, then think again")
    await click_approve(st, item, post, BOB_SLACK)
    await card_shows(slack, post, "1 of 2 approved: bob via Slack")

    async with st.client() as c:
        r = await c.post(
            f"/api/items/{item['id']}/decision",
            json={"decision": "reject", "reason": "wrong customer"},
        )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "rejected" and r.json()["reason"] == "wrong customer"
    run = await st.wait_run(item["run_id"], {"done"})
    told = [e["data"] for e in run["events"] if e["kind"] == "tool_result"]
    assert any("wrong customer" in str(t) for t in told)  # the model reads the reason
    assert len(sent(st)) == before
    await card_shows(slack, post, "Rejected")

    async with st.client() as c:  # ended: a late approval is not counted
        late = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})
    assert late.status_code == 409


async def test_an_edit_restarts_the_count_with_the_editor_as_its_first(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, post = await card(st, slack, "mail Ann, or rather Bea")
    await click_approve(st, item, post, ALICE_SLACK)
    await card_shows(slack, post, "1 of 2 approved: alice via Slack")

    # The owner edits from the terminal: new arguments, and a new count whose first
    # approval is the owner's.
    bea = {**EMAIL, "to": "bea@example.com"}
    edit = await asyncio.to_thread(cli, st, "edit", item["id"], "--set", "to=bea@example.com")
    assert edit.returncode == 0, edit.stderr
    assert "1 of 2 approved: owner via the API" in edit.stdout
    assert "another person must approve it" in edit.stdout
    edited = await item_now(st, item["id"])
    assert edited["status"] == "pending" and edited["args"] == bea
    assert edited["risk"]["approved"] == ["owner via the API"]
    # The owner edited it, so it is as they saw it: --yes says so (without it, the terminal
    # asks for the card's digest, as for anyone deciding an edited card).
    again = await asyncio.to_thread(cli, st, "approve", item["id"], "--yes")
    assert again.returncode != 0 and "owner approved this already" in again.stdout + again.stderr
    async with st.client() as c:
        twice = await c.post(f"/api/items/{item['id']}/decision", json={"decision": "approve"})
    assert twice.status_code == 409 and "owner approved this already" in twice.text
    update = await card_shows(slack, post, "1 of 2 approved: owner via the API")
    assert "bea@example.com" in blocks(update)

    # Alice's approval before the edit was for other arguments. Her click on the card as it
    # was before the edit counts for nothing: she is told the card changed, and it shows anew.
    await click_approve(st, item, post, ALICE_SLACK)
    [told] = await slack.wait_for(
        "chat.postEphemeral",
        lambda c: c.args.get("user") == ALICE_SLACK and "card changed" in c.args.get("text", ""),
    )
    assert "nothing was decided" in told.args["text"]
    assert (await item_now(st, item["id"]))["risk"]["approved"] == ["owner via the API"]
    # From the card as it is now, her approval makes two people for these arguments.
    await click_approve(st, item, update, ALICE_SLACK)
    decided = await item_becomes(st, item["id"], "edited")
    assert decided["final_args"] == bea
    assert decided["risk"]["approved"] == ["owner via the API", "alice via Slack"]
    run = await st.wait_run(item["run_id"], {"done"})
    assert "bea@example.com" in sent(st)
    decision = next(e["data"] for e in run["events"] if e["kind"] == "decision")
    assert decision["decision"] == "edit"
    assert decision["args_before"] == EMAIL and decision["args"] == bea


async def test_a_reply_to_a_mail_from_before_an_edit_decides_nothing(
    stack: Stack, slack: SlackApi, mail: MailServer
) -> None:
    """The owner edits the call after Carol got her mail. Her reply to that mail (still
    showing the old recipient) is refused and the thread gets the call as it is now; her reply to
    the newest mail counts, for the edited call."""
    st = stack
    to_ann = sent(st).count("ann@example.com")
    item, _ = await card(st, slack, "mail Ann, or Cleo after all")
    carol_mail = await item_mail(mail, "carol", item["id"])
    assert "ann@example.com" in plain(carol_mail)
    cleo = {**EMAIL, "to": "cleo@example.com"}
    async with st.client() as c:  # the owner edits: a new version, its count starts anew
        r = await c.post(
            f"/api/items/{item['id']}/decision", json={"decision": "edit", "args": cleo}
        )
    assert r.status_code == 200 and r.json()["version"] == 2, r.text

    stale = await answer(mail, carol_mail, "approve", sender=f"Carol <{CAROL}>")
    told = await mail.wait_for_mail(
        "carol", USERS["carol"], lambda m: m["In-Reply-To"] == stale["Message-ID"], timeout=30
    )
    assert "Nothing changed: the call was changed after the mail you answered" in plain(told)
    now = await item_now(st, item["id"])
    assert now["status"] == "pending" and now["risk"]["approved"] == ["owner via the API"]
    assert ("decision_refused", CAROL, "email") in await audit_of(st, item["id"])

    newest = await mail_saying(mail, "carol", item["id"], "cleo@example.com")
    await answer(mail, newest, "approve", sender=f"Carol <{CAROL}>")
    decided = await item_becomes(st, item["id"], "edited")
    assert decided["final_args"] == cleo
    assert decided["risk"]["approved"] == ["owner via the API", "carol via email"]
    await st.wait_run(item["run_id"], {"done"})
    assert "cleo@example.com" in sent(st) and sent(st).count("ann@example.com") == to_ann
