"""Email end to end: a real `pizzabot serve` process, the scripted model, the test MCP tools,
and a real SMTP + IMAP server. Alice gets each action as a mail in the run's thread and
answers from her mail client: edit (a wrong field first), approve, reject with a reason;
the result lands in the same thread, and her reply to it follows the run up."""

from __future__ import annotations

from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import aiosmtplib
import pytest

from pizzabot.agent.testing.scripts import count_role, last_tool_result, last_user_text
from tests.peers.email_bot import AUTHSERV_ID, reply_to, verified
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.required import require
from tests.peers.stack import Reply, Stack, ToolCall

pytestmark = pytest.mark.mail

ALICE = "alice@example.test"
ALICE_PW = DEFAULT_USERS["alice"]
EMAIL = {"to": "ann@example.com", "subject": "Quote", "body": "Here is the quote.", "copies": 1}


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


def three_mails_then_report(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
    """Propose send_email three times (to Ann, Bob, Cy), then report; answer a follow-up."""
    done = count_role(messages, "tool")
    if messages[-1].get("role") == "user" and done >= 3:
        return Reply(text=f"Noted your follow-up: {last_user_text(messages)}")
    if done < 3:
        to = ["ann@example.com", "bob@example.com", "cy@example.com"][done]
        return Reply(
            text=f"I will mail {to}.",
            tool_calls=[ToolCall("crm__send_email", {**EMAIL, "to": to}, id=f"call-{done}")],
        )
    return Reply(text=f"Finished. Last tool said: {last_tool_result(messages)}")


def env(mail: MailServer) -> dict[str, str]:
    return {
        "PIZZABOT_EMAIL_FROM": "bot@example.test",
        "PIZZABOT_SMTP_HOST": mail.host,
        "PIZZABOT_SMTP_PORT": str(mail.smtp_port),
        "PIZZABOT_SMTP_TLS": "none",
        "PIZZABOT_IMAP_HOST": mail.host,
        "PIZZABOT_IMAP_PORT": str(mail.imap_port),
        "PIZZABOT_IMAP_TLS": "false",
        "PIZZABOT_IMAP_USER": "bot",
        "PIZZABOT_IMAP_PASSWORD": DEFAULT_USERS["bot"],
        "PIZZABOT_IMAP_BACKOFF_MAX": "1",
        "PIZZABOT_EMAIL_ALLOWED_SENDERS": ALICE,
        "PIZZABOT_EMAIL_AUTHSERV_ID": AUTHSERV_ID,
        "PIZZABOT_PUBLIC_URL": "http://pizzabot.test",
    }


SKILL = {"deliver": {"email": [ALICE]}, "approvers": {"email": [ALICE]}}


def text_of(msg: EmailMessage) -> str:
    part = msg.get_body(("plain",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


async def item_mail(mail: MailServer, item_id: str) -> EmailMessage:
    return await mail.wait_for_mail(
        "alice",
        ALICE_PW,
        lambda m: m["X-Pizzabot-Item"] == item_id and m["Reply-To"] is not None,
        timeout=30,
    )


async def answer_to(mail: MailServer, sent: EmailMessage) -> EmailMessage:
    return await mail.wait_for_mail(
        "alice", ALICE_PW, lambda m: m["In-Reply-To"] == sent["Message-ID"], timeout=30
    )


async def send(mail: MailServer, msg: EmailMessage) -> None:
    await aiosmtplib.send(msg, hostname=mail.host, port=mail.smtp_port)


async def test_a_run_decided_entirely_by_mail(mail: MailServer, tmp_path: Path) -> None:
    async with Stack(tmp_path, script=three_mails_then_report, skill=SKILL, env=env(mail)) as st:
        run = await st.start_run("test", "send the quotes")
        first = await st.wait_item(run["id"])
        mail1 = await item_mail(mail, first["id"])
        assert mail1["Subject"] == "[pizzabot] test: send the quotes"
        assert "crm.send_email" in text_of(mail1) and "ann@example.com" in text_of(mail1)
        assert "http://pizzabot.test/mail/d/" in text_of(mail1)

        # An edit with a value the schema refuses: the errors come back by mail.
        bad = reply_to(mail1, "edit\ncopies: 11")
        await send(mail, bad)
        errors = await answer_to(mail, bad)
        assert "- copies:" in text_of(errors)
        assert (await st.wait_item(run["id"]))["status"] == "pending"

        # A good edit, as a reply to the error mail: the tool runs with it.
        good = reply_to(errors, "edit\ncopies: 2\npriority: high")
        await send(mail, good)
        second = await st.wait_item(run["id"], count=2)
        assert second["id"] != first["id"]
        async with st.client() as c:
            edited = (await c.get(f"/api/items/{first['id']}")).json()
        assert edited["status"] == "edited" and edited["decided_by"] == ALICE
        sent = [c["args"] for c in st.tool_calls() if c["tool"] == "send_email"]
        assert sent and sent[0]["copies"] == 2 and sent[0]["priority"] == "high"

        # The second action is in the same thread; approve it.
        mail2 = await item_mail(mail, second["id"])
        assert mail2["Subject"] == mail1["Subject"]
        assert mail1["Message-ID"] in str(mail2["References"])
        await send(mail, reply_to(mail2, "Approve"))
        third = await st.wait_item(run["id"], count=3)

        # The third: reject with a reason, which the model reads.
        mail3 = await item_mail(mail, third["id"])
        await send(mail, reply_to(mail3, "reject: Cy asked us to wait until Monday.\n\nThanks"))
        done = await st.wait_run(run["id"], {"done"})
        rejected = [e for e in done["events"] if e["kind"] == "decision"][-1]["data"]
        assert rejected["decision"] == "reject"
        assert rejected["reason"] == "Cy asked us to wait until Monday."
        assert rejected["actor"] == ALICE and rejected["channel"] == "email"
        assert [c["args"]["to"] for c in st.tool_calls() if c["tool"] == "send_email"] == [
            "ann@example.com",
            "bob@example.com",
        ]

        # The result lands in the same thread.
        unread = await st.wait_item(run["id"], box="unread")
        result = await item_mail(mail, unread["id"])
        assert result["Subject"] == mail1["Subject"]
        assert mail1["Message-ID"] in str(result["References"])
        assert "Finished." in text_of(result)

        # A reply to the result is a follow-up: the run goes on with it.
        await send(mail, reply_to(result, "Thanks! Please also tell Dee."))
        again = await st.wait_item(run["id"], box="unread", count=2)
        assert "Noted your follow-up: Thanks! Please also tell Dee." in again["body"]
        final = await st.get_run(run["id"])
        follow = [e for e in final["events"] if e["kind"] == "user_message"][-1]["data"]
        assert follow["by"] == ALICE and follow["channel"] == "email"


async def test_mailing_the_bot_starts_a_run(mail: MailServer, tmp_path: Path) -> None:
    script = three_mails_then_report
    async with Stack(tmp_path, script=script, skill=SKILL, env=env(mail)) as st:
        msg = EmailMessage()
        msg["From"] = f"Alice <{ALICE}>"
        msg["To"] = "bot@example.test"
        msg["Subject"] = "[test] quote for Ann"
        msg["Message-ID"] = make_msgid(domain="example.test")
        msg.set_content("Three copies, please.\n\n-- \nAlice")
        await send(mail, verified(msg))
        ack = await answer_to(mail, msg)
        assert "Started run" in text_of(ack)

        async with st.client() as c:
            runs = (await c.get("/api/runs")).json()["items"]
        [run] = [r for r in runs if r["trigger"] == "email"]
        assert run["skill"] == "test" and run["input"] == "quote for Ann\n\nThree copies, please."
        item = await st.wait_item(run["id"])
        assert (await item_mail(mail, item["id"]))["Subject"] == "[pizzabot] test: quote for Ann"

        # The link routes are served (and a bad link decides nothing).
        async with st.client() as c:
            page = await c.get("/mail/d/not-a-link")
        assert page.status_code == 410
