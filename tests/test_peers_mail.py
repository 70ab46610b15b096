"""The local mail peer behaves like the real mail the email channel will meet.

These tests pin down what the email channel relies on: SMTP in, IMAP out, IDLE push,
plus-addressed delivery to the bot, threading headers, refusal of bad logins, and mail
that keeps arriving while the IMAP server is down.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from email.message import EmailMessage
from email.utils import make_msgid

import aioimaplib
import aiosmtplib
import psutil
import pytest

from tests.peers import mailpeer
from tests.peers.mailserver import DEFAULT_USERS, MailPeerError, MailServer, fetch_bodies
from tests.peers.required import require

pytestmark = pytest.mark.mail

ALICE_PW = DEFAULT_USERS["alice"]
BOT_PW = DEFAULT_USERS["bot"]


@pytest.fixture(scope="module")
def mail_server() -> Iterator[MailServer]:
    require("mail")
    with MailServer() as server:
        yield server


def _message(*, sender: str, to: str, subject: str, body: str = "hello") -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain="example.test")
    message.set_content(body)
    return message


async def _send(server: MailServer, message: EmailMessage) -> None:
    await aiosmtplib.send(message, hostname=server.host, port=server.smtp_port)


def _subject() -> str:
    return f"test {uuid.uuid4().hex[:12]}"


async def test_mail_sent_over_smtp_is_read_back_over_imap(mail_server: MailServer) -> None:
    subject = _subject()
    sent = _message(
        sender=mail_server.address("bot"),
        to=mail_server.address("alice"),
        subject=subject,
        body="Approve the deploy?",
    )
    await _send(mail_server, sent)

    got = await mail_server.wait_for_mail("alice", ALICE_PW, lambda m: m["Subject"] == subject)

    assert got["Message-ID"] == sent["Message-ID"]
    body = got.get_body(("plain",))
    assert body is not None
    assert body.get_content().strip() == "Approve the deploy?"


async def test_idle_pushes_exists_when_mail_arrives(mail_server: MailServer) -> None:
    client = await mail_server.connect_imap("alice", ALICE_PW)
    try:
        selected = await client.select("INBOX")
        assert selected.result == "OK"
        idle = await client.idle_start(timeout=10)
        subject = _subject()
        await _send(
            mail_server,
            _message(sender="carol@example.test", to=mail_server.address("alice"), subject=subject),
        )

        push = await client.wait_server_push(timeout=10)
        client.idle_done()
        await idle

        assert isinstance(push, list)
        assert any(line.endswith(b" EXISTS") for line in push), push
        # The pushed count is the new message's sequence number: fetch exactly that one.
        count = next(line.split()[0] for line in push if line.endswith(b" EXISTS"))
        fetched = await client.fetch(count.decode(), "(BODY.PEEK[])")
        assert fetched.result == "OK"
        [raw] = fetch_bodies(fetched)
        assert f"Subject: {subject}".encode() in raw
    finally:
        await client.logout()


async def test_plus_address_reaches_the_bot_inbox(mail_server: MailServer) -> None:
    token = uuid.uuid4().hex[:16]
    subject = _subject()
    await _send(
        mail_server,
        _message(
            sender=mail_server.address("alice"),
            to=mail_server.address("bot", token),
            subject=subject,
        ),
    )

    got = await mail_server.wait_for_mail("bot", BOT_PW, lambda m: m["Subject"] == subject)

    assert got["To"] == f"bot+{token}@example.test"
    # dovecot records the envelope recipient too, so a Bcc'd bot can still find its token.
    assert got["Delivered-To"] == f"bot+{token}@example.test"
    # Alice's own mailbox did not get it: routing went by the local part before the '+'.
    alice_mail = await mail_server.fetch_all("alice", ALICE_PW)
    assert all(m["Subject"] != subject for m in alice_mail)


async def test_reply_keeps_threading_headers(mail_server: MailServer) -> None:
    subject = _subject()
    question = _message(
        sender=mail_server.address("bot", "req1"),
        to=mail_server.address("alice"),
        subject=subject,
    )
    await _send(mail_server, question)
    received = await mail_server.wait_for_mail("alice", ALICE_PW, lambda m: m["Subject"] == subject)

    reply = _message(
        sender=mail_server.address("alice"),
        to=str(received["From"]),
        subject=f"Re: {subject}",
        body="approve",
    )
    reply["In-Reply-To"] = received["Message-ID"]
    reply["References"] = received["Message-ID"]
    await _send(mail_server, reply)

    got = await mail_server.wait_for_mail("bot", BOT_PW, lambda m: m["Subject"] == f"Re: {subject}")
    assert got["In-Reply-To"] == question["Message-ID"]
    assert got["References"] == question["Message-ID"]
    assert got["To"] == "bot+req1@example.test"


async def test_wrong_password_is_refused(mail_server: MailServer) -> None:
    client = aioimaplib.IMAP4(host=mail_server.host, port=mail_server.imap_port, timeout=10)
    await client.wait_hello_from_server()
    response = await client.login("alice", "not-the-password")
    await client.logout()

    assert response.result == "NO"
    assert b"[AUTHENTICATIONFAILED]" in response.lines[0]
    with pytest.raises(MailPeerError):
        await mail_server.fetch_all("mallory", ALICE_PW)


async def test_unknown_recipient_is_refused_at_smtp(mail_server: MailServer) -> None:
    message = _message(sender="x@example.test", to="nobody-here@example.test", subject="lost")
    with pytest.raises(aiosmtplib.SMTPRecipientsRefused):
        await _send(mail_server, message)


async def test_mail_sent_while_imap_is_down_arrives_after_restart(
    mail_server: MailServer,
) -> None:
    before = _subject()
    await _send(
        mail_server,
        _message(sender="x@example.test", to=mail_server.address("bot", "t1"), subject=before),
    )
    await mail_server.wait_for_mail("bot", BOT_PW, lambda m: m["Subject"] == before)

    await mail_server.stop_imap()
    try:
        during = _subject()
        await _send(
            mail_server,
            _message(sender="x@example.test", to=mail_server.address("bot", "t2"), subject=during),
        )
        assert mail_server.queued == 1
        with pytest.raises(OSError):
            await mail_server.fetch_all("bot", BOT_PW)
    finally:
        await mail_server.start_imap()

    assert mail_server.queued == 0
    subjects = [m["Subject"] for m in await mail_server.fetch_all("bot", BOT_PW)]
    assert before in subjects
    assert during in subjects


async def test_stop_leaves_no_dovecot_process_behind() -> None:
    server = MailServer(users={"solo": "pw"})
    async with server:
        assert server.dovecot_pid is not None
        master = psutil.Process(server.dovecot_pid)
        family = [master, *master.children(recursive=True)]
        assert len(family) > 1  # the master runs at least its log, config and login helpers
        root = server.root
        assert await server.fetch_all("solo", "pw") == []

    _gone, alive = psutil.wait_procs(family, timeout=5)
    assert alive == []
    assert not root.exists()


async def test_a_port_taken_before_it_is_bound_is_picked_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process can take a port between its pick and its bind: start still works."""
    require("mail")
    taken = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    held = [sock.getsockname()[1] for sock in taken]
    free = mailpeer.free_port
    # Picks go IMAP, LMTP, SMTP: first dovecot's IMAP port is taken, then the SMTP front's.
    picks = iter([held[0], free(), free(), free(), free(), held[1]])
    monkeypatch.setattr(mailpeer, "free_port", lambda: next(picks, None) or free())
    try:
        async with MailServer(users={"solo": "pw"}) as server:
            assert server.imap_port not in held
            assert server.smtp_port not in held
            to = server.address("solo")
            await _send(server, _message(sender="x@example.test", to=to, subject="fresh ports"))
            subjects = [m["Subject"] for m in await server.fetch_all("solo", "pw")]
            assert subjects == ["fresh ports"]
    finally:
        for sock in taken:
            sock.close()
