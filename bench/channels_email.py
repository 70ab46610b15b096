"""The email side of the channels bench: a mail server for the served bot, and an approver
who reads the item's mail and answers it as a mail client does.

The served bot's email channel is configured as in production, on the real mail peer
(`tests.peers.mailpeer`, dovecot behind an SMTP front): it mails each item to the approver over
SMTP and watches its own mailbox with IMAP IDLE. The approver reads the real message from
their mailbox over IMAP and submits a real reply over SMTP: to the item's `Reply-To` (the
bot's plus-address with the approver's token), `In-Reply-To`/`References` naming the item's
mail, "approve" on the first line and the original quoted below. The reply passes the same
checks as any approver's (the skill's approvers, the token, the sender's verdict): it carries
the `Authentication-Results` a receiving server adds after a passing DMARC check, under the
authserv-id the served bot is told to trust (`AUTHSERV_ID`), as with the email tests.

Imported only when the channels part runs: aiosmtpd comes with the `bench` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import os
import time
from email.message import EmailMessage
from email.utils import make_msgid
from types import TracebackType
from typing import Any

import aioimaplib
import aiosmtplib

from tests.peers.mailpeer import DOVECOT, MailPeerError, MailServer, fetch_bodies

BOT = "bot"
APPROVER = "approver"
USERS = {BOT: "bench-bot-pw", APPROVER: "bench-approver-pw"}
#: The receiving server whose verdicts the served bot trusts (PIZZABOT_EMAIL_AUTHSERV_ID).
AUTHSERV_ID = "mx.bench.test"


def missing() -> str | None:
    """Why the email figure cannot be measured on this machine, or None."""
    if not os.access(DOVECOT, os.X_OK):
        return f"dovecot ({DOVECOT}) is missing: run .ci/install-system-packages"
    return None


def peer() -> MailServer:
    """The mail server: the bot's mailbox and the approver's."""
    return MailServer(users=USERS)


def server_env(mail: MailServer) -> dict[str, str]:
    """The served bot's email settings: SMTP out, IMAP in with IDLE (the default)."""
    return {
        "PIZZABOT_EMAIL_FROM": mail.address(BOT),
        "PIZZABOT_SMTP_HOST": mail.host,
        "PIZZABOT_SMTP_PORT": str(mail.smtp_port),
        "PIZZABOT_SMTP_TLS": "none",
        "PIZZABOT_IMAP_HOST": mail.host,
        "PIZZABOT_IMAP_PORT": str(mail.imap_port),
        "PIZZABOT_IMAP_TLS": "none",
        "PIZZABOT_IMAP_USER": BOT,
        "PIZZABOT_IMAP_PASSWORD": USERS[BOT],
        "PIZZABOT_EMAIL_AUTHSERV_ID": AUTHSERV_ID,
    }


def reply_to(card: EmailMessage, text: str, *, sender: str) -> EmailMessage:
    """A reply as mail clients write one: to `Reply-To`, "Re:" subject, threading headers,
    the answer on top and the original quoted below."""
    domain = sender.rpartition("@")[2]
    msg = EmailMessage()
    msg["Authentication-Results"] = (
        f"{AUTHSERV_ID}; dkim=pass header.d={domain}; dmarc=pass header.from={domain}"
    )
    msg["From"] = f"Bench Approver <{sender}>"
    msg["To"] = str(card["Reply-To"] or card["From"])
    subject = str(card["Subject"])
    msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    msg["Message-ID"] = make_msgid(domain=domain)
    msg["In-Reply-To"] = str(card["Message-ID"])
    refs = str(card.get("References", "")).split()
    msg["References"] = " ".join([*refs, str(card["Message-ID"])])
    part = card.get_body(("plain",))
    quoted = part.get_content() if isinstance(part, EmailMessage) else ""
    quote = "\n".join("> " + line for line in quoted.splitlines())
    msg.set_content(f"{text}\n\nOn {card['Date']}, {card['From']} wrote:\n{quote}\n")
    return msg


class Approver:
    """The approver's mail client: their inbox over IMAP, their replies over SMTP."""

    def __init__(self, mail: MailServer) -> None:
        self.mail = mail
        self.address = mail.address(APPROVER)
        self._imap: aioimaplib.IMAP4 | None = None

    async def __aenter__(self) -> Approver:
        self._imap = await self.mail.connect_imap(APPROVER, USERS[APPROVER])
        selected = await self._imap.select("INBOX")
        if selected.result != "OK":
            raise MailPeerError(f"SELECT INBOX failed: {selected.lines!r}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._imap is not None:
            with contextlib.suppress(Exception):
                await self._imap.logout()

    async def card(self, item_id: str, timeout: float = 30.0) -> EmailMessage:
        """The item's mail (the one that asks for a decision, with a `Reply-To`)."""
        assert self._imap is not None
        deadline = time.monotonic() + timeout
        while True:
            found = await self._imap.uid_search("HEADER", "X-Pizzabot-Item", item_id)
            uids = found.lines[0].split() if found.result == "OK" and found.lines else []
            for uid in uids:
                fetched = await self._imap.uid("fetch", uid.decode(), "(BODY.PEEK[])")
                for raw in fetch_bodies(fetched):
                    msg = _parse(raw)
                    if msg["Reply-To"] is not None:
                        return msg
            if time.monotonic() > deadline:
                raise TimeoutError(f"no mail for item {item_id} in the approver's mailbox")
            await asyncio.sleep(0.02)

    async def answer(self, card: EmailMessage, text: str) -> tuple[float, float]:
        """Submit a reply to `card`: (wall time the SMTP server accepted it, i.e. answered
        the DATA exchange; milliseconds the submission took from connecting)."""
        msg = reply_to(card, text, sender=self.address)
        smtp = aiosmtplib.SMTP(hostname=self.mail.host, port=self.mail.smtp_port, timeout=30)
        began = time.perf_counter()
        await smtp.connect()
        try:
            refused, _ = await smtp.send_message(msg)
            accepted = time.time()
            submit_ms = (time.perf_counter() - began) * 1000
            if refused:
                raise MailPeerError(f"the SMTP server refused the reply: {refused!r}")
        finally:
            with contextlib.suppress(Exception):
                await smtp.quit()
        return accepted, submit_ms


def _parse(raw: bytes) -> EmailMessage:
    message: Any = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message
