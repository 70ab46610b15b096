"""A tool's question answered in Slack and by email, end to end: a real `pizzabot serve` with
Slack in HTTP mode (Slack's Web API played by the recorder, clicks and modals sent as signed
payloads) and email (the real SMTP + IMAP peer), the scripted model, and the "ask" MCP server
whose tools ask for input in the middle of a call. The tool's own log shows exactly what it
got back, with the type of every value. A link that a browser would open elsewhere than it
reads is refused before any channel shows it; an international one shows in ASCII everywhere.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import aiosmtplib
import httpx
import pytest
import pytest_asyncio

from pizzabot.agent.argforms import form_fields
from pizzabot.channels.slack.blocks import field_block
from tests.peers import mcp_elicit, mcp_tools
from tests.peers.email_bot import AUTHSERV_ID, reply_to
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.required import require
from tests.peers.server import TOKEN
from tests.peers.slack_api import (
    Call,
    SlackApi,
    block_actions,
    checkbox_value,
    http_mode_env,
    number_value,
    post_interaction,
    select_value,
    text_value,
    view_submission,
)
from tests.peers.stack import Stack
from tests.test_questions_e2e import ANSWER, TYPES, call_the_named_tool
from tests.waiting import eventually

pytestmark = [pytest.mark.mail, pytest.mark.asyncio(loop_scope="module")]

SECRET = "questions-e2e-signing-secret"
APPROVER = "U1"
ALICE = "alice@example.test"
ALICE_PW = DEFAULT_USERS["alice"]


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    slack: SlackApi, mail: MailServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    root = tmp_path_factory.mktemp("questions-channels")
    env = http_mode_env(
        slack.url,
        SECRET,
        PIZZABOT_PUBLIC_URL="http://pizzabot.test",
        PIZZABOT_EMAIL_FROM="bot@example.test",
        PIZZABOT_SMTP_HOST=mail.host,
        PIZZABOT_SMTP_PORT=str(mail.smtp_port),
        PIZZABOT_SMTP_TLS="none",
        PIZZABOT_IMAP_HOST=mail.host,
        PIZZABOT_IMAP_PORT=str(mail.imap_port),
        PIZZABOT_IMAP_TLS="false",
        PIZZABOT_IMAP_USER="bot",
        PIZZABOT_IMAP_PASSWORD=DEFAULT_USERS["bot"],
        PIZZABOT_IMAP_BACKOFF_MAX="1",
        PIZZABOT_EMAIL_AUTHSERV_ID=AUTHSERV_ID,
    )
    skill = {
        "mcp_servers": {"ask": mcp_elicit.server_entry(root / "tools.jsonl")},
        "tools": {"ask.profile": "auto", "ask.connect": "auto", "ask.link": "auto"},
        "deliver": {"slack": "C123", "email": [ALICE]},
        "approvers": {"slack": [APPROVER], "email": [ALICE]},
    }
    async with Stack(root, script=call_the_named_tool, skill=skill, env=env) as st:
        yield st


def answers(stack: Stack, tool: str) -> list[dict[str, Any]]:
    return [line for line in mcp_tools.read_log(stack.tools_log) if line.get("tool") == tool]


async def tool_got(stack: Stack, tool: str, count: int) -> dict[str, Any]:
    async def logged() -> dict[str, Any] | None:
        lines = answers(stack, tool)
        return lines[-1] if len(lines) >= count else None

    return await eventually(logged, what=f"{tool} to get its answer", timeout=60)


async def asked(stack: Stack, tool: str) -> dict[str, Any]:
    """Start a run whose tool asks; its question item once it is there."""
    run = await stack.start_run("test", f"{tool} please")
    item = await stack.wait_item(run["id"], box="action")
    assert item["kind"] == "question"
    return item


async def card(slack: SlackApi, item_id: str) -> Call:
    [post] = await slack.wait_for(
        "chat.postMessage", lambda c: item_id in json.dumps(c.args.get("blocks") or "")
    )
    return post


async def click(stack: Stack, post: Call, item_id: str, action: str) -> str:
    payload = block_actions(
        action_id=action,
        value=item_id,
        user=APPROVER,
        channel=str(post.answer["channel"]),
        message_ts=str(post.answer["ts"]),
    )
    r = await post_interaction(f"{stack.server.url}/slack/events", payload, secret=SECRET)
    assert r.status_code == 200, r.text
    return str(payload["trigger_id"])


async def item_mail(mail: MailServer, item_id: str, containing: str = "") -> EmailMessage:
    return await mail.wait_for_mail(
        "alice",
        ALICE_PW,
        lambda m: m["X-Pizzabot-Item"] == item_id and containing in text_of(m),
        timeout=30,
    )


def text_of(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


def several(*values: str) -> dict[str, Any]:
    options = [{"text": {"type": "plain_text", "text": v}, "value": v} for v in values]
    return {"value": {"type": "multi_static_select", "selected_options": options}}


def slack_answer() -> dict[str, Any]:
    """`ANSWER` as Slack's inputs send it, by the modal's block ids."""
    meeting = int(datetime(2026, 12, 1, 9, 30, tzinfo=UTC).timestamp())
    by_name = {
        "name": text_value("Ann Lee"),
        "email": {"value": {"type": "email_text_input", "value": "ann@example.com"}},
        "homepage": {"value": {"type": "url_text_input", "value": "https://ann.example.com/"}},
        "birthday": {"value": {"type": "datepicker", "selected_date": "1990-04-01"}},
        "meeting": {"value": {"type": "datetimepicker", "selected_date_time": meeting}},
        "seats": number_value("3"),
        "budget": number_value("12.5"),
        "vip": checkbox_value(True),
        "size": select_value("medium"),
        "color": select_value("g"),
        "tags": several("new", "late"),
        "pets": several("dog"),
    }
    blocks = {f.name: field_block(i) for i, f in enumerate(form_fields(mcp_elicit.FORM, {}))}
    return {blocks[name]: value for name, value in by_name.items()}


async def test_a_form_answered_in_a_slack_modal_reaches_the_tool_typed(
    stack: Stack, slack: SlackApi, mail: MailServer
) -> None:
    before = len(answers(stack, "profile"))
    item = await asked(stack, "profile")
    post = await card(slack, item["id"])
    assert "Fill in the customer's profile, please." in json.dumps(post.args["blocks"])

    trigger = await click(stack, post, item["id"], "pizza_answer")
    [opened] = await slack.wait_for("views.open", lambda c: c.args.get("trigger_id") == trigger)
    view = opened.args["view"]
    submitted = view_submission(view=view, user=APPROVER, values=slack_answer())
    r = await post_interaction(f"{stack.server.url}/slack/events", submitted, secret=SECRET)
    assert r.status_code == 200 and not r.content, r.text

    got = await tool_got(stack, "profile", before + 1)
    assert got["action"] == "accept"
    assert got["content"] == ANSWER and got["types"] == TYPES
    await slack.wait_for(
        "chat.update",
        lambda c: (
            c.args.get("ts") == post.answer["ts"]
            and "Answered by <@U1> via slack" in json.dumps(c.args.get("blocks"))
        ),
    )
    # Alice's mail of the same question says who answered, and how.
    told = await item_mail(mail, item["id"], "Answered by U1 via slack")
    assert "color: Green" in text_of(told) and "tags: new, late" in text_of(told)
    slack.check()


async def test_a_form_answered_by_mail_reaches_the_tool_typed(
    stack: Stack, mail: MailServer
) -> None:
    before = len(answers(stack, "profile"))
    item = await asked(stack, "profile")
    got_mail = await item_mail(mail, item["id"], "Fill in the customer's profile")
    assert "seats: a whole number from 1 to 9; required" in text_of(got_mail)
    lines = [
        "name: Ann Lee",
        "email: ann@example.com",
        "homepage: https://ann.example.com/",
        "birthday: 1990-04-01",
        "meeting: 2026-12-01T09:30:00Z",
        "Seats: 3",
        "budget: 12.5",
        "VIP: yes",
        "size: medium",
        "color: Green",
        "tags: new, late",
        "pets: Dog",
    ]
    reply = reply_to(got_mail, "\n".join(lines) + "\n\nThanks,\nAlice")
    await aiosmtplib.send(reply, hostname=mail.host, port=mail.smtp_port)

    got = await tool_got(stack, "profile", before + 1)
    assert got["action"] == "accept"
    assert got["content"] == ANSWER and got["types"] == TYPES


async def test_a_question_declined_by_mail_tells_the_tool_decline(
    stack: Stack, mail: MailServer
) -> None:
    before = len(answers(stack, "profile"))
    item = await asked(stack, "profile")
    got_mail = await item_mail(mail, item["id"], "Fill in the customer's profile")
    reply = reply_to(got_mail, "decline: we do not keep birthdays")
    await aiosmtplib.send(reply, hostname=mail.host, port=mail.smtp_port)

    got = await tool_got(stack, "profile", before + 1)
    assert got["action"] == "decline" and got["content"] is None
    async with stack.client() as c:
        decided = (await c.get(f"/api/items/{item['id']}")).json()
    assert decided["status"] == "rejected" and decided["reason"] == "we do not keep birthdays"


async def test_a_link_is_done_from_slack(stack: Stack, slack: SlackApi) -> None:
    before = len(answers(stack, "connect"))
    item = await asked(stack, "connect")
    post = await card(slack, item["id"])
    shown = json.dumps(post.args["blocks"])
    assert "Opens *example.test* (host `auth.example.test`)" in shown
    await click(stack, post, item["id"], "pizza_open_link")
    await click(stack, post, item["id"], "pizza_approve")

    got = await tool_got(stack, "connect", before + 1)
    assert got["action"] == "accept"
    slack.check()


#: Links that read as leading to bank.example but open evil.test (or are not https), and
#: what the refusal says.
MISLEADING = {
    "backslash": ("https://evil.test\\@bank.example/login", "backslash"),
    "userinfo": ("https://bank.example@evil.test/login", "user name or password"),
    "http": ("http://bank.example/login", "only a link starting https:// is offered"),
}


async def web_page(stack: Stack, path: str) -> str:
    """A page of the web inbox as a signed-in person gets it."""
    async with httpx.AsyncClient(base_url=stack.server.url, follow_redirects=True) as web:
        assert (await web.get("/login", params={"token": TOKEN})).status_code == 200
        page = await web.get(path)
    assert page.status_code == 200, page.text
    return page.text


async def alices_mail(mail: MailServer) -> list[EmailMessage]:
    return await mail.fetch_all("alice", ALICE_PW)


@pytest.mark.parametrize("case", list(MISLEADING))
async def test_a_link_that_opens_elsewhere_than_it_reads_is_refused_and_shown_nowhere(
    stack: Stack, slack: SlackApi, mail: MailServer, case: str
) -> None:
    url, reason = MISLEADING[case]
    before = len(answers(stack, "link"))
    run = await stack.start_run("test", f"link {url}")
    got = await tool_got(stack, "link", before + 1)
    assert got["action"] == "cancel"  # the tool hears no one will open it
    done = await stack.wait_run(run["id"], {"done"})
    [note] = [e["data"]["question"] for e in done["events"] if e["kind"] == "note"]
    assert note["url"] == url and reason in note["refused"]

    # No card anywhere: nothing in the inbox, nothing posted to Slack, nothing mailed.
    async with stack.client() as c:
        items = (await c.get("/api/inbox", params={"box": "action", "all": "true"})).json()
    assert [i for i in items["items"] if i["run_id"] == run["id"]] == []
    posted = json.dumps([c.args for c in slack.calls_to("chat.postMessage")])
    assert "Opens *bank.example" not in posted and "Opens *evil.test" not in posted
    mailed = [text_of(m) for m in await alices_mail(mail)]
    assert not [t for t in mailed if "leads to: bank.example" in t or "leads to: evil" in t]
    # The run's page says the question was refused and why, and names no host it leads to.
    page = await web_page(stack, f"/runs/{run['id']}")
    assert "asked a question that cannot be shown" in page and reason in page
    assert "leads to" not in page and "Open link" not in page


async def test_an_international_link_shows_as_punycode_on_every_channel(
    stack: Stack, slack: SlackApi, mail: MailServer
) -> None:
    url = "https://b\u0430nk.example/login"  # a Cyrillic "а" in a look-alike of bank.example
    puny = "xn--bnk-6cd.example"
    before = len(answers(stack, "link"))
    run = await stack.start_run("test", f"link {url}")
    item = await stack.wait_item(run["id"], box="action")
    assert item["kind"] == "question" and item["args"] == {"url": url}

    post = await card(slack, item["id"])
    shown = json.dumps(post.args["blocks"], ensure_ascii=False)
    assert f"Opens *{puny}*" in shown and "b\u0430nk" not in shown
    [row] = [b for b in post.args["blocks"] if b["type"] == "actions"]
    [opener] = [e for e in row["elements"] if e["action_id"] == "pizza_open_link"]
    assert opener["url"] == f"https://{puny}/login"

    got_mail = await item_mail(mail, item["id"], "The link leads to")
    assert f"The link leads to: {puny}" in text_of(got_mail)
    assert f"https://{puny}/login" in text_of(got_mail) and "b\u0430nk" not in text_of(got_mail)

    page = await web_page(stack, f"/items/{item['id']}")
    assert f"It leads to <b>{puny}</b>" in page
    assert f'href="https://{puny}/login"' in page and "b\u0430nk.example" not in page

    assert (await stack.decide(item["id"], "reject")).status_code == 200
    assert (await tool_got(stack, "link", before + 1))["action"] == "decline"
    slack.check()
