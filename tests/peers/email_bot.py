"""The email channel in-process against the real mail peer, for tests that need to watch it.

    async with EmailBot(mail, tmp_path) as bot:
        item = await bot.action()                       # an action item, mailed to alice
        got = await bot.mail_for(item.id)               # the mail in alice's mailbox
        await send(mail, reply_to(got, "approve"))      # alice answers like a mail client
        assert await bot.next_outcome() == "decided: approve"

The bot believes a mail only with a passing verdict from the receiving server (the default
mail trust rule): `AUTHSERV_ID` names that server, and `reply_to` writes the header it adds
after a passing DMARC check (`passed`), as the topmost `Authentication-Results`. A test
about forgery leaves it out (`verified=False`) or writes its own.

No server process, no model, no worker: a SQLite `SqlStore`, the engine's `Inbox` and
`Runs`, the outbox `Dispatcher` with the `EmailChannel` (wired by `pizzabot.bot.core.build`, as the
server wires them), and the `ImapReceiver` feeding `MailHandler` — the parts `pizzabot.bot.wire_email`
makes, on a fresh bot mailbox per instance (a new dovecot user), so tests sharing one
`MailServer` do not see each other's mail.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import replace
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosmtplib
import psutil

from pizzabot.agent.addresses import EmailTarget
from pizzabot.agent.engine import finish_run
from pizzabot.agent.events import NewEvent, ToolRequest
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Risk, RunStatus
from pizzabot.agent.outbox import Limits
from pizzabot.agent.policy import Access
from pizzabot.agent.skills import Approvers, Deliver, Skill, SkillBook
from pizzabot.bot.core import Timing, build
from pizzabot.channels.email import (
    EmailChannel,
    ImapConfig,
    ImapReceiver,
    InboundConfig,
    LinkDesk,
    MailHandler,
    MailIdentity,
    MailKey,
    MailTrust,
    SmtpConfig,
    SmtpMailer,
)
from pizzabot.store.mail import SqlMailLog
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.peers.mailserver import DEFAULT_USERS, MailServer
from tests.waiting import eventually

ALICE = "alice@example.test"
MALLORY = "mallory@example.test"
ALICE_PW = DEFAULT_USERS["alice"]
MALLORY_PW = DEFAULT_USERS["mallory"]

#: The authserv-id of the server that receives the bot's mail: the bots and servers in the
#: tests trust its `Authentication-Results` (PIZZABOT_EMAIL_AUTHSERV_ID).
AUTHSERV_ID = "mx.example.test"
TRUST = MailTrust(authserv_id=AUTHSERV_ID)


def passed(sender: str, *, authserv_id: str = AUTHSERV_ID) -> str:
    """The `Authentication-Results` the receiving server adds to a mail whose DMARC check
    for `sender`'s domain passed (DKIM aligned)."""
    domain = sender.rpartition("@")[2].rstrip(">").lower()
    return (
        f"{authserv_id}; dkim=pass (2048-bit key) header.d={domain} header.s=mail; "
        f"spf=pass smtp.mailfrom={domain}; dmarc=pass (p=REJECT) header.from={domain}"
    )


def verified(msg: EmailMessage, *, authserv_id: str = AUTHSERV_ID) -> EmailMessage:
    """`msg` as the receiving server delivers it after a passing DMARC check: its verdict
    on top of the headers."""
    sender = msg["From"].addresses[0].addr_spec
    headers = list(msg.items())
    for name in {name for name, _ in headers}:
        del msg[name]
    msg["Authentication-Results"] = passed(sender, authserv_id=authserv_id)
    for name, value in headers:
        msg[name] = value
    return msg


SEND_EMAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"title": "To", "type": "string"},
        "subject": {"title": "Subject", "type": "string"},
        "body": {"title": "Body", "type": "string"},
        "priority": {"default": "normal", "enum": ["low", "normal", "high"], "type": "string"},
        "copies": {"default": 1, "maximum": 10, "minimum": 1, "type": "integer"},
    },
    "required": ["to", "subject", "body"],
}
PROPOSED = {"to": "ann@example.com", "subject": "Quote", "body": "Here it is.", "copies": 1}


#: Spare bot mailboxes to create the MailServer with (`MailServer(users=USERS)`): each
#: EmailBot takes a fresh one. Adding users later works too but costs a second each, as
#: dovecot looks at its passwd-file at most once a second.
SPARE_BOTS = [f"bot{n}" for n in range(1, 41)]
USERS = {**DEFAULT_USERS, **{name: f"{name}-pw" for name in SPARE_BOTS}}
_taken: set[tuple[int, str]] = set()


async def _fresh_user(mail: MailServer) -> tuple[str, str]:
    for name in SPARE_BOTS:
        if name in mail.users and (id(mail), name) not in _taken:
            _taken.add((id(mail), name))
            return name, mail.users[name]
    name = f"bot{uuid.uuid4().hex[:8]}"
    mail.add_user(name, f"{name}-pw")
    await eventually(lambda: mail.knows(name, f"{name}-pw"), what=f"dovecot to know {name}")
    return name, f"{name}-pw"


def email_skill(**over: Any) -> Skill:
    fields: dict[str, Any] = {
        "name": "test",
        "instructions": "x",
        "model": "openai/scripted",
        "approvers": Approvers(email=[ALICE]),
        "deliver": Deliver(email=[ALICE]),
    }
    fields.update(over)
    return Skill(**fields)


async def send(mail: MailServer, msg: EmailMessage | bytes, *, to: list[str] | None = None) -> None:
    """Submit a message to the mail peer as a client would (no TLS, no auth)."""
    if isinstance(msg, bytes):
        assert to is not None
        await aiosmtplib.send(
            msg, sender=ALICE, recipients=to, hostname=mail.host, port=mail.smtp_port
        )
    else:
        await aiosmtplib.send(msg, recipients=to, hostname=mail.host, port=mail.smtp_port)


async def stop_imap_dropping_clients(mail: MailServer) -> None:
    """`MailServer.stop_imap`, and the clients' connections really drop.

    On its own, stopping dovecot's master leaves the per-client `imap` processes running
    and serving their open connections (until the client logs out), so a connected client
    would never notice the outage. A restarted or crashed mail server drops them: these
    leftovers of the dovecot this test started are ended here, by pid.
    """
    pid = mail.dovecot_pid
    family = psutil.Process(pid).children(recursive=True) if pid is not None else []
    await mail.stop_imap()
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    await asyncio.to_thread(psutil.wait_procs, family, 5)


def reply_to(
    received: EmailMessage,
    text: str,
    *,
    sender: str = f"Alice Example <{ALICE}>",
    cc: str | None = None,
    to: str | None = None,
    headers: dict[str, str] | None = None,
    verify: bool = True,
) -> EmailMessage:
    """A reply the way mail clients write one: to Reply-To, Re: subject, threading headers,
    the answer on top and the original quoted below. As delivered it carries the receiving
    server's passing verdict (`passed`), unless `verify` is False or `headers` holds an
    `Authentication-Results` of its own."""
    msg = EmailMessage()
    own = any(name.lower() == "authentication-results" for name in headers or {})
    if verify and not own:
        msg["Authentication-Results"] = passed(sender)
    msg["From"] = sender
    msg["To"] = to or str(received["Reply-To"] or received["From"])
    if cc:
        msg["Cc"] = cc
    subject = str(received["Subject"])
    msg["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    msg["Message-ID"] = make_msgid(domain="example.test")
    msg["In-Reply-To"] = str(received["Message-ID"])
    refs = str(received.get("References", "")).split()
    msg["References"] = " ".join([*refs, str(received["Message-ID"])])
    for name, value in (headers or {}).items():
        msg[name] = value
    part = received.get_body(("plain",))
    quoted = part.get_content() if isinstance(part, EmailMessage) else ""
    quote = "\n".join("> " + line for line in quoted.splitlines())
    msg.set_content(f"{text}\n\nOn Mon, Nov 30, 2026 at 10:02 AM Pizza Bot wrote:\n{quote}\n")
    return msg


class EmailBot:
    def __init__(
        self,
        mail: MailServer,
        tmp_path: Path,
        *,
        skill: Skill | None = None,
        public_url: str | None = None,
        allowed_senders: frozenset[str] = frozenset(),
        default_skill: str | None = None,
        max_bytes: int = 5_000_000,
        idle: bool = True,
        poll_interval: float = 0.3,
        trust: MailTrust = TRUST,
    ) -> None:
        self.mail = mail
        self.db = f"sqlite+aiosqlite:///{tmp_path / f'bot-{uuid.uuid4().hex[:8]}.db'}"
        self.skills = SkillBook({(skill or email_skill()).name: skill or email_skill()})
        self.public_url = public_url
        self.allowed_senders = allowed_senders
        self.inbound = InboundConfig(default_skill=default_skill, trust=trust, max_bytes=max_bytes)
        self.imap = ImapConfig(
            host=mail.host,
            port=mail.imap_port,
            tls=False,
            idle_refresh=30.0,
            poll_interval=poll_interval,
            backoff_initial=0.1,
            backoff_max=0.5,
            timeout=5.0,
            max_bytes=max_bytes,
            idle=idle,
        )
        self.outcomes: list[str] = []
        self._read = 0
        self._changed = asyncio.Condition()
        self._tasks: list[asyncio.Task[Any]] = []
        self._receiver_task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> EmailBot:
        self.user, self.password = await _fresh_user(self.mail)
        self.address = f"{self.user}@{self.mail.domain}"
        self.identity = MailIdentity(address=self.address)
        self.key = MailKey(MailKey.generate())
        self.imap = replace(self.imap, user=self.user, password=self.password)
        engine = connect(self.db)
        await upgrade(engine)
        self.store = SqlStore(engine)
        self.access = Access(skills=self.skills, email_senders=self.allowed_senders)
        self.mailer = SmtpMailer(
            SmtpConfig(host=self.mail.host, port=self.mail.smtp_port, tls="none")
        )
        self.channel = EmailChannel(
            mailer=self.mailer,
            identity=self.identity,
            store=self.store,
            access=self.access,
            key=self.key,
            public_url=self.public_url,
            answer_retries=(0.2,),
        )
        # No model and no worker: the test makes the items a run would.
        core = build(
            store=self.store,
            skills=self.skills,
            channels={"email": self.channel},
            mind=None,
            timing=Timing(poll_interval=0.1, outbox=Limits(backoff_base=0.05)),
            access=self.access,
        )
        self.ctx, self.inbox, self.runs = core.ctx, core.inbox, core.runs
        self.dispatcher = core.dispatcher
        self.log = SqlMailLog(self.store)
        self.links = LinkDesk(store=self.store, inbox=self.inbox, log=self.log, key=self.key)
        self.handler = MailHandler(
            store=self.store,
            inbox=self.inbox,
            runs=self.runs,
            skills=self.skills,
            access=self.access,
            log=self.log,
            answerer=self.channel,
            identity=self.identity,
            config=self.inbound,
            key=self.key,
        )
        self._tasks.append(asyncio.create_task(self.dispatcher.run_forever()))
        self.start_receiver()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop_receiver()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        await self.channel.aclose()
        await self.store.aclose()

    # -- the receiver ----------------------------------------------------------------------

    def start_receiver(self) -> None:
        """A fresh receiver, as after a server restart."""
        self.receiver = ImapReceiver(self.imap, self._handle)
        self._receiver_task = asyncio.create_task(self.receiver.run_forever())

    async def stop_receiver(self) -> None:
        if self._receiver_task is not None:
            self._receiver_task.cancel()
            with contextlib.suppress(BaseException):
                await self._receiver_task
            self._receiver_task = None

    async def _handle(self, raw: bytes, *, size: int | None, fallback_id: str) -> str:
        outcome = await self.handler.handle(raw, size=size, fallback_id=fallback_id)
        async with self._changed:
            self.outcomes.append(outcome)
            self._changed.notify_all()
        return outcome

    async def outcome(self, index: int, timeout: float = 60.0) -> str:
        """The `index`-th outcome (0-based), once the receiver got that far (woken by the
        handler itself; the deadline only bounds a test that would otherwise hang on a busy
        machine)."""
        async with self._changed, asyncio.timeout(timeout):
            await self._changed.wait_for(lambda: len(self.outcomes) > index)
            self._read = max(self._read, index + 1)
            return self.outcomes[index]

    async def next_outcome(self, timeout: float = 60.0) -> str:
        """The first outcome the test has not read yet. Counted from what was read, not
        from what has arrived: the receiver may handle a mail before `send` returns."""
        return await self.outcome(self._read, timeout)

    # -- making items ----------------------------------------------------------------------

    async def action(
        self,
        args: dict[str, Any] | None = None,
        *,
        run_input: str = "send Ann the quote",
        run_id: str | None = None,
    ) -> Item:
        """An action item on a waiting run (a new run, or `run_id`), mailed by the outbox."""
        now = self.ctx.clock()
        skill = self.skills.all()[0]
        if run_id is None:
            run = await self.store.create_run(
                run_id=self.ctx.ids(), skill=skill.name, input=run_input, trigger="api", now=now
            )
            run_id = run.id
        status = (await self.store.get_run(run_id)).status
        for step in {
            RunStatus.QUEUED: [RunStatus.RUNNING],
            RunStatus.WAITING: [RunStatus.QUEUED, RunStatus.RUNNING],
        }.get(status, []):
            await self.store.set_status(run_id, step, lease=None, now=now)
        item = Item(
            id=self.ctx.ids(),
            run_id=run_id,
            skill=skill.name,
            box=Box.ACTION,
            kind=ItemKind.TOOL,
            status=ItemStatus.PENDING,
            title=f"{skill.name} wants to run crm.send_email",
            body="I will mail Ann.",
            created_at=now,
            call_id=f"call-{uuid.uuid4().hex[:6]}",
            tool="crm.send_email",
            args=dict(PROPOSED if args is None else args),
            schema=SEND_EMAIL_SCHEMA,
            risk=Risk(impact="high", reversible=False, scope="external"),
            secret=self.ctx.secrets(),
        )
        await self.store.create_item(
            item,
            targets=[EmailTarget(a) for a in skill.deliver.email],
            lease=None,
            now=now,
            run_status=RunStatus.WAITING,
            events=[NewEvent(ToolRequest(item_id=item.id, call_id=item.call_id or ""))],
        )
        self.dispatcher.wake()
        return item

    async def finish(self, run_id: str, result: str = "All done: mailed Ann.") -> Item:
        """End the run (it must be runnable): its Unread item is mailed in the same thread."""
        now = self.ctx.clock()
        run = await self.store.get_run(run_id)
        if run.status is RunStatus.QUEUED:
            run = await self.store.set_status(run_id, RunStatus.RUNNING, lease=None, now=now)
        await finish_run(
            self.ctx,
            run,
            RunStatus.DONE,
            lease=None,
            skill=self.skills.get(run.skill),
            result=result,
        )
        self.dispatcher.wake()
        items = await self.store.list_items(run_id=run_id, box=Box.UNREAD)
        return items[0]

    # -- reading mail ----------------------------------------------------------------------

    async def mail_for(
        self,
        item_id: str,
        *,
        user: str = "alice",
        password: str = ALICE_PW,
        where: Callable[[EmailMessage], bool] = lambda m: m["Reply-To"] is not None,
        timeout: float = 15.0,
    ) -> EmailMessage:
        """The mail about `item_id` in `user`'s mailbox (by default the item mail itself)."""
        return await self.mail.wait_for_mail(
            user,
            password,
            lambda m: m["X-Pizzabot-Item"] == item_id and where(m),
            timeout=timeout,
        )

    async def answers_to(
        self, message_id: str, *, user: str = "alice", password: str = ALICE_PW
    ) -> list[EmailMessage]:
        """The bot's answers to the mail `message_id`, in `user`'s mailbox now."""
        await self.channel.answers_sent()
        mails = await self.mail.fetch_all(user, password)
        return [m for m in mails if m["In-Reply-To"] == message_id]
