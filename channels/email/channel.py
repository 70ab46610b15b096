"""`EmailChannel`: inbox items out by SMTP, one thread per run and recipient.

`deliver` mails an item into its run's thread; `update` mails how an action ended (a mail
cannot be edited, so the outcome follows in the thread); `answer` replies to a mail the bot
received (an error, a refusal, an acknowledgement); `send_signin` mails a sign-in link to the
web page (`pizzabot.channels.web.mail_signin`). An SMTP outage raises `DeliveryError`,
so the outbox retries with backoff: it only delays delivery. SMTP logs in with a password
or with SASL XOAUTH2 (a token from a `TokenSource`; a refused token is replaced once).

Only a copy to someone the policy lets decide the item by email (`pizzabot.agent.policy.Access`: its
email approvers) carries something that can decide: that approver's own reply token and,
with a public URL, signed links made out to them. A copy to anyone else in `deliver.email`
is for information: no token, no links.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from email.message import EmailMessage
from typing import Literal, Protocol

from pizzabot.agent.addresses import EmailRef
from pizzabot.agent.channel import DeliveryError
from pizzabot.agent.context import utcnow
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Delivery, Item, ItemKind, Run
from pizzabot.agent.policy import EMAIL, Access, Principal
from pizzabot.channels.email.compose import (
    Links,
    MailIdentity,
    Thread,
    answer_mail,
    item_mail,
    notice_mail,
    subject_for,
)
from pizzabot.channels.email.headers import HeaderError
from pizzabot.channels.email.keys import MailKey
from pizzabot.channels.email.links import make_links
from pizzabot.channels.email.ports import MailStore, TokenSource
from pizzabot.channels.email.signin import signin_mail
from pizzabot.channels.email.undo_links import undo_link

log = logging.getLogger(__name__)

TlsMode = Literal["starttls", "tls", "none"]


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int = 587
    tls: TlsMode = "starttls"
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 30.0
    #: Certificates to trust instead of the system's (a private CA); None: the system's.
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)


class SmtpMailer:
    """Sends one message; any failure becomes a `DeliveryError` (permanent for a 5xx about
    the message or its recipients; a refused login is not: fixing the account sends it)."""

    def __init__(self, config: SmtpConfig, *, tokens: TokenSource | None = None) -> None:
        self.config = config
        #: Set: log in with SASL XOAUTH2 and these tokens instead of the password.
        self.tokens = tokens

    async def send(self, msg: EmailMessage) -> None:
        import aiosmtplib

        from pizzabot.channels.email.oauth import OAuthError

        c = self.config
        try:
            if self.tokens is None:
                await self._send(msg, password=c.password)
            else:
                await self._send_xoauth2(msg, self.tokens)
        except OAuthError as exc:
            raise DeliveryError(f"no OAuth token for SMTP: {exc}") from exc
        except aiosmtplib.SMTPAuthenticationError as exc:
            raise DeliveryError(
                f"SMTP login as {c.user} refused: {exc.code} {exc.message}"
            ) from exc
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [r.code for r in exc.recipients]
            permanent = bool(codes) and all(500 <= code < 600 for code in codes)
            raise DeliveryError(f"SMTP refused the recipients: {exc}", permanent=permanent) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise DeliveryError(
                f"SMTP said {exc.code} {exc.message}", permanent=500 <= exc.code < 600
            ) from exc
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            raise DeliveryError(f"SMTP server {c.host}:{c.port} unreachable: {exc}") from exc

    async def _send_xoauth2(self, msg: EmailMessage, tokens: TokenSource) -> None:
        import aiosmtplib

        token = await tokens.token()
        try:
            await self._send(msg, token=token)
            return
        except aiosmtplib.SMTPAuthenticationError:
            # Refused before MAIL FROM, so sending again cannot duplicate the message.
            tokens.invalidate(token)
            log.info("SMTP refused the access token for %s; fetching a new one", self.config.user)
        await self._send(msg, token=await tokens.token())

    async def _send(
        self, msg: EmailMessage, *, password: str | None = None, token: str | None = None
    ) -> None:
        import aiosmtplib

        c = self.config

        async def current_token() -> str:
            assert token is not None
            return token

        await aiosmtplib.send(
            msg,
            hostname=c.host,
            port=c.port,
            username=c.user,
            password=password,
            oauth_token_generator=current_token if token is not None else None,
            use_tls=c.tls == "tls",
            start_tls=c.tls == "starttls",
            tls_context=c.ssl_context if c.tls != "none" else None,
            timeout=c.timeout,
        )


class Mailer(Protocol):
    """What the channel sends with: `SmtpMailer`, or a fake in tests."""

    async def send(self, msg: EmailMessage) -> None: ...


class EmailChannel:
    name = EMAIL

    def __init__(
        self,
        *,
        mailer: Mailer,
        identity: MailIdentity,
        store: MailStore,
        access: Access,
        key: MailKey,
        public_url: str | None = None,
        link_ttl: float = 86400,
        clock: Callable[[], datetime] = utcnow,
        answer_retries: tuple[float, ...] = (2.0, 10.0, 60.0),
    ) -> None:
        self.mailer = mailer
        self.key = key
        self.identity = identity
        self.store = store
        self.access = access
        self.public_url = public_url.rstrip("/") if public_url else None
        self.link_ttl = link_ttl
        self.clock = clock
        self.answer_retries = answer_retries
        self._answers: set[asyncio.Task[None]] = set()

    async def _earlier(self, run_id: str, delivery: Delivery) -> list[str]:
        """Message-IDs of this run's mails to the same address sent before `delivery`."""
        ids: list[str] = []
        for d in await self.store.run_deliveries(run_id, self.name):
            if d.id == delivery.id:
                break
            if d.address.lower() == delivery.address.lower() and isinstance(d.ref, EmailRef):
                ids.append(d.ref.message_id)
        return ids

    async def _subject(self, run: Run, item: Item, delivery: Delivery) -> str:
        """The subject of the run's thread to this address: from the run's input, or from
        the question's title where a question started the thread (its mail named it so)."""
        first = next(
            (
                d
                for d in await self.store.run_deliveries(run.id, self.name)
                if d.address.lower() == delivery.address.lower()
            ),
            None,
        )
        head = item
        if first is not None and first.item_id != item.id:
            try:
                head = await self.store.get_item(first.item_id)
            except NotFound:
                return subject_for(run.skill, run.input)
        if head.kind is ItemKind.QUESTION:
            return subject_for(run.skill, head.title)
        return subject_for(run.skill, run.input)

    async def deliver(self, item: Item, delivery: Delivery) -> EmailRef:
        run = await self.store.get_run(item.run_id)
        earlier = await self._earlier(item.run_id, delivery)
        thread = Thread.of(await self._subject(run, item, delivery), earlier)
        can = bool(self.access.may_decide(Principal.of(EMAIL, delivery.address), item))
        token = self.key.reply_token(item.id, delivery.address, item.version) if can else None
        message_id = self.identity.item_message_id(delivery.id, token)
        now = self.clock()
        try:
            links = None
            if self.public_url and can and item.box is Box.ACTION:
                links = make_links(
                    self.key,
                    item,
                    address=delivery.address,
                    base_url=self.public_url,
                    ttl=self.link_ttl,
                    now=now,
                )
            elif self.public_url and can and item.undo is not None:
                links = self._undo_links(item, delivery.address, self.public_url, now)
            msg = item_mail(
                item,
                run,
                identity=self.identity,
                to=delivery.address,
                message_id=message_id,
                thread=thread,
                can_decide=can,
                token=token,
                links=links,
                now=now,
            )
        except (HeaderError, ValueError) as exc:
            raise DeliveryError(f"not mailed: {exc}", permanent=True) from exc
        await self.mailer.send(msg)
        root = earlier[0] if earlier else message_id
        return EmailRef(message_id=message_id, thread=root, address=delivery.address)

    def _undo_links(self, item: Item, address: str, base_url: str, now: datetime) -> Links:
        """An FYI's Undo link (`undo_links`), for one who may undo it. An Unread mail reads
        only `undo` (and the page): an FYI has nothing to approve or reject."""
        url = undo_link(
            self.key, item, address=address, base_url=base_url, ttl=self.link_ttl, now=now
        )
        page = f"{base_url.rstrip('/')}/items/{item.id}"
        return Links(approve=page, reject=page, edit=None, expires=now, page=page, undo=url)

    async def update(self, item: Item, delivery: Delivery) -> None:
        """Mail how an action ended into its thread (decided here or on another channel),
        each new count of an action that needs more than one person's approval, and how an
        FYI's Undo went."""
        counting = item.risk.approvals_text is not None and not item.decided
        undone = item.undo is not None and item.undo.state in ("done", "failed")
        if not undone and (item.box is not Box.ACTION or not (item.decided or counting)):
            return
        run = await self.store.get_run(item.run_id)
        earlier = await self._earlier(item.run_id, delivery)
        if isinstance(delivery.ref, EmailRef):
            earlier.append(delivery.ref.message_id)
        # A count still open may follow an edit: its notice carries the approver's token for
        # the item as it is now, so a reply to it decides what it shows.
        can = counting and bool(self.access.may_decide(Principal.of(EMAIL, delivery.address), item))
        token = self.key.reply_token(item.id, delivery.address, item.version) if can else None
        try:
            msg = notice_mail(
                item,
                identity=self.identity,
                to=delivery.address,
                message_id=self.identity.notice_message_id(delivery.id, _state(item)),
                thread=Thread.of(await self._subject(run, item, delivery), earlier),
                now=self.clock(),
                token=token,
            )
        except HeaderError as exc:
            raise DeliveryError(f"not mailed: {exc}", permanent=True) from exc
        await self.mailer.send(msg)

    async def answer(
        self, original: EmailMessage, *, to: str, text: str, token: str | None = None
    ) -> None:
        """Reply to a received mail, in the background: SMTP trouble must not hold up the
        receive loop, and a failed answer is retried a few times, then logged. An answer
        that cannot be written (no plain address to write to) is logged, not raised: the
        mail it answers was handled."""
        try:
            msg = answer_mail(
                original, identity=self.identity, to=to, text=text, token=token, now=self.clock()
            )
        except HeaderError as exc:
            log.warning("answer not sent: %s", exc)
            return
        self._later(msg)

    def send_signin(self, *, to: str, link: str, expires: datetime) -> None:
        """Mail `to` a sign-in link, in the background and retried as an answer is: the page
        that asked does not wait for SMTP. The link is never logged."""
        try:
            msg = signin_mail(
                identity=self.identity, to=to, link=link, expires=expires, now=self.clock()
            )
        except HeaderError as exc:
            log.warning("sign-in link not sent: %s", exc)
            return
        self._later(msg)

    def _later(self, msg: EmailMessage) -> None:
        task = asyncio.create_task(self._send_answer(msg), name="email-answer")
        self._answers.add(task)
        task.add_done_callback(self._answers.discard)

    async def _send_answer(self, msg: EmailMessage) -> None:
        for attempt, pause in enumerate((*self.answer_retries, None)):
            try:
                await self.mailer.send(msg)
                return
            except DeliveryError as exc:
                if exc.permanent or pause is None:
                    log.warning("answer to %s not sent: %s", msg["To"], exc)
                    return
                log.info("answer to %s failed (attempt %d): %s", msg["To"], attempt + 1, exc)
                await asyncio.sleep(pause)

    async def answers_sent(self) -> None:
        """Wait for answers in flight (tests; a graceful shutdown)."""
        while self._answers:
            await asyncio.gather(*list(self._answers), return_exceptions=True)

    async def aclose(self) -> None:
        tasks = list(self._answers)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _state(item: Item) -> str:
    """What a notice's Message-ID names: the outcome, or while approvals are counted, the
    count and the arguments it is for (so a retried update sends the same mail again)."""
    if item.decided:
        return str(item.status)
    if item.undo is not None:
        return f"undo-{item.undo.state}"
    seen = json.dumps([item.risk.approved, item.args], sort_keys=True, default=str)
    return f"count{len(item.risk.approved)}-{hashlib.sha256(seen.encode()).hexdigest()[:12]}"
