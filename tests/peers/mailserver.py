"""The mail peer for tests: `tests.peers.mailpeer` (dovecot behind an SMTP front, on loopback),
with what only tests need around it: ``tls=True`` with a throw-away CA's certificate, a wait
for a matching mail, and the session fixture.

The peer itself ships with the bench (`pizzabot bench` measures an email reply with it), so
the bench and the tests start one and the same mail server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.peers import mailpeer
from tests.peers.certs import TestCertificates, make_certificates
from tests.peers.mailpeer import (
    DEFAULT_USERS,
    DOMAIN,
    MailPeerError,
    TokenProvider,
    fetch_bodies,
    free_port,
    mailbox_user,
)
from tests.peers.required import DOVECOT, require
from tests.waiting import eventually

__all__ = [
    "DEFAULT_USERS",
    "DOMAIN",
    "MailPeerError",
    "MailServer",
    "fetch_bodies",
    "free_port",
    "mail_server",
    "mailbox_user",
]


class MailServer(mailpeer.MailServer):
    """`tests.peers.mailpeer.MailServer`; ``tls=True``: STARTTLS on both ports, implicit TLS
    IMAP on ``imaps_port``, SMTP AUTH required, and clients trust
    ``mail.certs.client_context()`` (a CA made for this server)."""

    def __init__(
        self,
        *,
        users: Mapping[str, str] = DEFAULT_USERS,
        domain: str = DOMAIN,
        dovecot: str = DOVECOT,
        tls: bool = False,
        oauth: TokenProvider | None = None,
    ) -> None:
        super().__init__(
            users=users,
            domain=domain,
            dovecot=dovecot,
            certificates=self._certificates if tls else None,
            oauth=oauth,
        )

    def _certificates(self, folder: Path) -> TestCertificates:
        return make_certificates(folder, host=self.host)

    @property
    def certs(self) -> TestCertificates:
        """The CA and server certificate of a ``tls=True`` server."""
        certs = super().certs
        assert isinstance(certs, TestCertificates)
        return certs

    async def wait_for_mail(
        self,
        user: str,
        password: str,
        predicate: Callable[[EmailMessage], bool],
        timeout: float = 10.0,
        mailbox: str = "INBOX",
    ) -> EmailMessage:
        """The first message in ``mailbox`` matching ``predicate``, polling until ``timeout``."""
        seen: list[EmailMessage] = []

        async def matching() -> EmailMessage | None:
            nonlocal seen
            seen = await self.fetch_all(user, password, mailbox)
            return next((m for m in seen if predicate(m)), None)

        return await eventually(
            matching,
            what=f"a matching mail for {user!r} in {mailbox}",
            timeout=timeout,
            retry_on=(OSError,),
            context=lambda: f"saw {[str(m['Subject']) for m in seen]}",
        )


@pytest.fixture(scope="session")
def mail_server() -> Iterator[MailServer]:
    """One dovecot + SMTP front for the session, with users bot, alice and mallory.

    Sync on purpose: it works with any event loop scope. Mailboxes are shared between
    tests, so tests should tell their mail apart (unique subject or plus-address tag).
    """
    require("mail")
    with MailServer() as server:
        yield server
