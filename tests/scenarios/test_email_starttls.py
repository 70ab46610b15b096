"""IMAP on port 143 with STARTTLS, and TLS checks that do not bend, against real dovecot.

The mail peer runs with a certificate from a throw-away CA; clients trust that CA and
verify the certificate and host name as they would in production. The cases a user would
notice: the bot reads its mailbox over an upgraded connection; it refuses a certificate it
cannot trust and a server without STARTTLS rather than send its password in the clear; a
forged plaintext answer slipped in before the TLS handshake ends the connection.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Iterator

import aioimaplib
import aiosmtplib
import pytest

from pizzabot.agent.channel import DeliveryError
from pizzabot.channels.email import ImapConfig, ImapReceiver, SmtpConfig, SmtpMailer
from pizzabot.channels.email.imap_ext import StartTlsError, starttls
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.peers.required import require
from tests.scenarios.test_email_oauth import Inbox, message, send_as_alice, spare_user
from tests.waiting import eventually

pytestmark = pytest.mark.mail

ALICE_PW = DEFAULT_USERS["alice"]
SPARE = {f"tls{n}": uuid.uuid4().hex for n in range(8)}  # see tests/test_email_oauth.py


@pytest.fixture(scope="module")
def mail() -> Iterator[MailServer]:
    require("mail")
    with MailServer(users={**DEFAULT_USERS, **SPARE}, tls=True) as server:
        yield server


@pytest.fixture(scope="module")
def plain_mail() -> Iterator[MailServer]:
    """A server that offers no TLS at all."""
    require("mail")
    with MailServer(users={**DEFAULT_USERS, **SPARE}) as server:
        yield server


def fresh_user(mail: MailServer) -> tuple[str, str]:
    return spare_user(mail, "tls")


def config(mail: MailServer, user: str, password: str, **overrides: object) -> ImapConfig:
    values: dict[str, object] = {
        "host": mail.host,
        "port": mail.imap_port,
        "tls": "starttls",
        "user": user,
        "password": password,
        "ssl_context": mail.certs.client_context() if mail.tls else None,
        "timeout": 5.0,
        "backoff_initial": 0.05,
        "backoff_max": 0.2,
    }
    return ImapConfig(**{**values, **overrides})  # type: ignore[arg-type]


async def first_round(receiver: ImapReceiver) -> None:
    """Run the receiver until it is connected or about to back off after a failure."""
    backing_off = asyncio.Event()

    async def sleep(_seconds: float) -> None:
        backing_off.set()
        await asyncio.Event().wait()

    receiver.sleep = sleep
    task = asyncio.create_task(receiver.run_forever())
    connected = asyncio.ensure_future(receiver.connected.wait())
    failed = asyncio.ensure_future(backing_off.wait())
    try:
        async with asyncio.timeout(15):
            await asyncio.wait({connected, failed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in (connected, failed, task):
            waiter.cancel()
        await asyncio.gather(connected, failed, task, return_exceptions=True)


def logins(mail: MailServer, user: str) -> list[str]:
    return [line for line in mail.imap_logins() if f"user=<{user}>" in line]


async def the_login(mail: MailServer, user: str) -> str:
    """The one login of `user` in the mail server's log, once its log has it (it writes the
    line on its own time, after the session began)."""
    found = await eventually(lambda: logins(mail, user) or None, what=f"a login of {user}")
    [login] = found
    return login


async def test_the_receiver_reads_mail_over_starttls_on_the_imap_port(mail: MailServer) -> None:
    user, password = fresh_user(mail)
    inbox = Inbox()
    receiver = ImapReceiver(config(mail, user, password), inbox)
    task = asyncio.create_task(receiver.run_forever())
    try:
        async with asyncio.timeout(10):
            await receiver.connected.wait()
        msg = message(sender=mail.address("alice"), to=mail.address(user))
        await send_as_alice(mail, msg)
        await inbox.wait_for(str(msg["Subject"]))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    login = await the_login(mail, user)
    assert "method=PLAIN" in login and ", TLS," in login


async def test_implicit_tls_still_works(mail: MailServer) -> None:
    user, password = fresh_user(mail)
    receiver = ImapReceiver(config(mail, user, password, port=mail.imaps_port, tls=True), Inbox())
    await first_round(receiver)
    assert receiver.connects == 1
    login = await the_login(mail, user)
    assert ", TLS," in login


async def test_a_certificate_the_bot_cannot_trust_stops_it_before_the_login(
    mail: MailServer,
) -> None:
    user, password = fresh_user(mail)
    # The system's CAs, as in production: they do not know the test CA.
    receiver = ImapReceiver(config(mail, user, password, ssl_context=None), Inbox())
    await first_round(receiver)
    assert receiver.connects == 0 and receiver.failures == 1
    assert logins(mail, user) == []


async def test_a_server_without_starttls_gets_no_plaintext_login(plain_mail: MailServer) -> None:
    user, password = fresh_user(plain_mail)
    receiver = ImapReceiver(config(plain_mail, user, password), Inbox())
    await first_round(receiver)
    assert receiver.connects == 0 and receiver.failures == 1
    assert logins(plain_mail, user) == []


async def test_plaintext_slipped_in_before_the_handshake_ends_the_connection() -> None:
    """A man in the middle answers STARTTLS with OK plus a forged line in the same packet;
    the client must not read that line as the server's."""

    async def fake_imap(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"* OK fake IMAP ready\r\n")
        while line := await reader.readline():
            tag, _, command = line.decode().strip().partition(" ")
            if command.upper() == "CAPABILITY":
                writer.write(f"* CAPABILITY IMAP4rev1 STARTTLS\r\n{tag} OK done\r\n".encode())
            elif command.upper() == "STARTTLS":
                writer.write(f"{tag} OK go\r\n* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n".encode())
        writer.close()

    server = await asyncio.start_server(fake_imap, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = aioimaplib.IMAP4(host="127.0.0.1", port=port, timeout=5)
        await client.wait_hello_from_server()
        with pytest.raises(StartTlsError, match="data after agreeing"):
            await starttls(
                client,
                ssl_context=ssl.create_default_context(),
                server_hostname="127.0.0.1",
                timeout=5,
            )
        assert "AUTH=PLAIN" not in client.protocol.capabilities
        client.protocol.transport.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_smtp_over_starttls_with_a_password(mail: MailServer) -> None:
    user, password = fresh_user(mail)
    smtp = SmtpConfig(
        host=mail.host,
        port=mail.smtp_port,
        tls="starttls",
        user=user,
        password=password,
        ssl_context=mail.certs.client_context(),
    )
    msg = message(sender=mail.address(user), to=mail.address("alice"))

    await SmtpMailer(smtp).send(msg)

    got = await mail.wait_for_mail("alice", ALICE_PW, lambda m: m["Subject"] == msg["Subject"])
    assert got["Message-ID"] == msg["Message-ID"]


async def test_smtp_refuses_an_untrusted_certificate(mail: MailServer) -> None:
    smtp = SmtpConfig(
        host=mail.host, port=mail.smtp_port, tls="starttls", user="alice", password=ALICE_PW
    )
    with pytest.raises(DeliveryError) as caught:
        await SmtpMailer(smtp).send(message(sender="alice@example.test", to="bot@example.test"))
    assert isinstance(caught.value.__cause__, aiosmtplib.SMTPException | ssl.SSLError | OSError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
