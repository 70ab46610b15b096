"""Outside text cannot add a header to a mail the bot writes, nor stop the bot answering.

An RFC 2047 encoded word that decodes to CR/LF (``=?utf-8?q?Hi=0D=0AReply-To:_a@evil?=``)
used to come out of this machine's Python (CVE-2024-6923) as a raw header line: a run's
input put a second `Reply-To` above the bot's own on every item mail, and a spoofed inbound
Subject put a `Bcc:` and the attacker's text into the bot's answer. A Subject whose encoded
CR/LF decoded in one step made composing the answer raise, after the run had started, and
the mail was tried again. The mails here go through the real SMTP + IMAP peers and are read
back as the recipient's client reads them; every other source is checked on the composed
bytes.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

import pytest

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Risk, Run, RunStatus
from pizzabot.channels.email.compose import (
    MailIdentity,
    Thread,
    answer_mail,
    item_mail,
    notice_mail,
    subject_for,
)
from tests.peers.email_bot import ALICE, MALLORY, MALLORY_PW, USERS, EmailBot, passed, send
from tests.peers.mailserver import MailServer
from tests.peers.required import require

pytestmark = pytest.mark.mail

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
BOT = MailIdentity(address="bot@example.test")


def q(text: str) -> str:
    """`text` as one RFC 2047 Q-encoded word."""
    body = "".join(chr(b) if chr(b).isalnum() else f"={b:02X}" for b in text.encode())
    return f"=?utf-8?q?{body}?="


INJECT_REPLY_TO = q("Hi\r\nReply-To: a@evil.example")
INJECT_BCC = f"\r\nBcc: {MALLORY}\r\n\r\nYour approval is needed at http://evil.example/"
# One decoding step leaves an encoded word that decodes to CR/LF: survives a naive decode.
TWICE = q(q("Hi" + INJECT_BCC))
PAYLOADS = [
    INJECT_REPLY_TO,
    TWICE,
    q("Hi" + INJECT_BCC),
    "Hi\u2028Bcc: a@evil.example",
    "Hi\x85Bcc: a@evil.example",
]


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users=USERS) as server:
        yield server


async def test_a_run_input_cannot_add_a_reply_to_to_the_item_mail(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action(run_input=f"{INJECT_REPLY_TO}\nthe rest of the task")
        got = await bot.mail_for(item.id)
        [reply_to] = got.get_all("Reply-To", [])
        assert reply_to.addresses[0].addr_spec.startswith(f"{bot.user}+")
        assert "evil" not in "".join(f"{k}{v}" for k, v in got.items() if k != "Subject")
        assert "\n" not in str(got["Subject"]) and "\r" not in str(got["Subject"])


async def test_a_spoofed_subject_cannot_add_a_bcc_or_text_to_the_refusal(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path) as bot:
        # "From: Alice" without the item's token: refused, and Alice (known) is told.
        raw = _raw_mail(sender=ALICE, to=bot.address, subject=f"Re: [pizzabot] {TWICE}")
        await send(mail, raw, to=[bot.address])
        assert (await bot.next_outcome()).startswith("refused: ")
        [answer] = await bot.answers_to(_message_id(raw))
        assert answer.get_all("Bcc") is None
        assert len(answer.get_all("Reply-To") or []) == 1
        body = answer.get_body(("plain",))
        assert isinstance(body, EmailMessage)
        assert body.get_content().startswith("Your mail was not acted on")
        assert "evil.example" not in body.get_content()
        got = await mail.fetch_all("mallory", MALLORY_PW)
        assert [m for m in got if m["Auto-Submitted"] == "auto-replied"] == []


async def test_a_subject_with_an_encoded_line_break_still_gets_its_answer_once(
    mail: MailServer, tmp_path: Path
) -> None:
    async with EmailBot(mail, tmp_path, allowed_senders=frozenset({ALICE})) as bot:
        raw = _raw_mail(sender=ALICE, to=bot.address, subject="[test] " + q("Hi" + INJECT_BCC))
        await send(mail, raw, to=[bot.address])
        outcome = await bot.next_outcome()
        assert outcome.startswith("started: ")
        assert len(await bot.store.list_runs()) == 1
        [ack] = await bot.answers_to(_message_id(raw))
        assert ack.get_all("Bcc") is None and "\n" not in str(ack["Subject"])
        assert bot.outcomes == [outcome]  # handled once, not failed and tried again


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("utf8", [False, True])
def test_no_source_of_header_text_adds_a_header(payload: str, utf8: bool) -> None:
    """Every outside text that reaches a header, through every mail the bot composes."""
    item = _item(tool=f"crm.{payload}", title=payload)
    run = _run(skill=payload, text=f"{payload}\nmore")
    thread = Thread(subject_for(run.skill, run.input))
    inbound = email.message_from_bytes(
        _raw_mail(sender=ALICE, to="bot@example.test", subject=f"Re: {payload}"),
        policy=email.policy.default,
    )
    assert isinstance(inbound, EmailMessage)
    mails = {
        "item": item_mail(
            item,
            run,
            identity=BOT,
            to=ALICE,
            message_id=BOT.item_message_id("d1", "tok"),
            thread=thread,
            can_decide=True,
            token="tok",
            links=None,
            now=NOW,
        ),
        "notice": notice_mail(
            _item(status=ItemStatus.APPROVED, decided_by=ALICE, decided_via="email"),
            identity=BOT,
            to=ALICE,
            message_id=BOT.notice_message_id("d1", "approved"),
            thread=thread,
            now=NOW,
        ),
        "answer": answer_mail(inbound, identity=BOT, to=ALICE, text="nope", token=None, now=NOW),
    }
    policy = email.policy.SMTPUTF8 if utf8 else email.policy.SMTP
    for kind, msg in mails.items():
        data = msg.as_bytes(policy=policy)
        head = data.split(b"\r\n\r\n", 1)[0].decode("utf-8")
        names = [
            line.split(":", 1)[0].lower() for line in head.split("\r\n") if line[:1] not in " \t"
        ]
        assert "bcc" not in names and names.count("reply-to") <= 1, (kind, head)
        assert len(names) == len(set(names)), (kind, head)
        assert all(len(line) <= 998 for line in head.split("\r\n"))
        again = email.message_from_bytes(data, policy=email.policy.default)
        assert "\n" not in str(again["Subject"]) and "\r" not in str(again["Subject"])
        assert again["From"].addresses[0].addr_spec == BOT.address
        assert again["To"].addresses[0].addr_spec == ALICE


def _raw_mail(*, sender: str, to: str, subject: str) -> bytes:
    """A mail with its Subject written raw, as an attacker's client can (with the receiving
    server's passing verdict on top: the Subject is what is tested)."""
    return (
        f"Authentication-Results: {passed(sender)}\r\n"
        f"From: {sender}\r\nTo: {to}\r\nSubject: {subject}\r\n"
        f"Message-ID: {make_msgid(domain='example.test')}\r\n"
        "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nhello\r\n"
    ).encode()


def _message_id(raw: bytes) -> str:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    return str(msg["Message-ID"])


def _run(*, skill: str, text: str) -> Run:
    return Run(
        id="r1",
        skill=skill,
        status=RunStatus.WAITING,
        input=text,
        trigger="api",
        created_at=NOW,
        updated_at=NOW,
    )


def _item(**over: object) -> Item:
    fields: dict[str, object] = {
        "id": "i1",
        "run_id": "r1",
        "skill": "test",
        "box": Box.ACTION,
        "kind": ItemKind.TOOL,
        "status": ItemStatus.PENDING,
        "title": "test wants to run crm.send_email",
        "body": "I will mail Ann.",
        "created_at": NOW,
        "tool": "crm.send_email",
        "args": {"to": "ann@example.com"},
        "schema": {"type": "object", "properties": {"to": {"type": "string"}}},
        "risk": Risk(impact="high"),
        "secret": "s",
        "decided_at": NOW,
    }
    fields.update(over)
    return Item(**fields)  # type: ignore[arg-type]
