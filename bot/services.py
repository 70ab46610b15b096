"""The running server's parts, as `pizzabot.bot.server.build` made them: what the routes, the CLI's
`worker` and the lifespan use, each under its own typed name.

The parts of one capability (Slack, email, the triggers) are grouped, and a group is None
when the settings leave it off. The wiring modules (`pizzabot.bot.wire_*`) make the groups and import
this module for their shapes; this module imports none of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pizzabot.agent.channel import Channel
from pizzabot.agent.context import Context
from pizzabot.agent.engine import Runner
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.outbox import Dispatcher
from pizzabot.agent.policy import Access
from pizzabot.agent.policy.tokens import TokenDesk
from pizzabot.agent.requests import Requests
from pizzabot.agent.runs import Runs
from pizzabot.agent.tools_mcp import ToolHub
from pizzabot.agent.worker import Worker
from pizzabot.bot.core import Core
from pizzabot.bot.settings import Settings
from pizzabot.bot.skill_reload import SkillFiles
from pizzabot.channels.web.live import Changes
from pizzabot.store.sql import SqlStore
from pizzabot.store.tokens import SqlTokens

if TYPE_CHECKING:
    from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler
    from slack_bolt.app.async_app import AsyncApp

    from pizzabot.agent.timers import Timers
    from pizzabot.channels.email import EmailChannel, ImapReceiver, LinkDesk
    from pizzabot.channels.slack import HomeTabs, SlackChannel
    from pizzabot.channels.triggers.scheduler import Scheduler
    from pizzabot.channels.web.phone import PhoneDeps
    from pizzabot.store.pg import Leadership


@dataclass(frozen=True)
class SlackParts:
    channel: SlackChannel
    #: The Bolt app with its listeners (Socket Mode connects it; HTTP mode serves it).
    app: AsyncApp
    home: HomeTabs
    #: The handler of `POST /slack/events` in HTTP mode, None in Socket Mode.
    handler: AsyncSlackRequestHandler | None


@dataclass(frozen=True)
class EmailParts:
    channel: EmailChannel
    #: Serves the one-time decision links; None without a public URL (no mail has links).
    desk: LinkDesk | None
    #: Watches the bot's mailbox; None without an IMAP host (sending only).
    receiver: ImapReceiver | None


@dataclass(frozen=True)
class ChatParts:
    """A chat channel beside Slack (Teams, Discord, Telegram), as `pizzabot.bot.wire_chats`
    makes it: the channel items are delivered on, and what answers the platform."""

    channel: Channel
    #: The platform's inbound side (its route finds it here), typed by its own package.
    inbound: Any


@dataclass(frozen=True)
class TriggerParts:
    #: The schedules (the schedules API and the web page list them).
    scheduler: Scheduler
    #: Approval time-outs, reminders and escalations.
    timers: Timers


@dataclass
class Services:
    settings: Settings
    token: str
    store: SqlStore
    #: The engine's parts (context, runs, inbox, engine, worker, outbox), as `pizzabot.bot.core` wires them.
    core: Core
    #: Who may do what (decide, start, follow up, revoke, manage tokens): one for every channel.
    access: Access
    #: Named tokens: looked up for every request, made and revoked through `token_desk`.
    tokens: SqlTokens
    token_desk: TokenDesk
    tools: ToolHub
    #: The skills folder: what the last load refused, and reloading it.
    skill_files: SkillFiles
    #: What starting did to the database ("created (schema 0006)"), None when nothing.
    schema_change: str | None = None
    slack: SlackParts | None = None
    email: EmailParts | None = None
    #: Schedules and approval timers; None in a process that only steps runs.
    triggers: TriggerParts | None = None
    #: Teams, Discord and Telegram, by channel name: only those the settings turn on.
    chats: dict[str, ChatParts] = field(default_factory=dict)
    #: Push subscriptions and passkeys, as the web page uses them (`pizzabot.bot.wire_phone`).
    phone: PhoneDeps | None = None
    #: What the web page's long-polls wait on; rung by the outbox and the runs channel.
    live: Changes = field(default_factory=Changes)
    #: Long-lived tasks (receivers, loops) cancelled at shutdown.
    background: list[asyncio.Task[Any]] = field(default_factory=list)
    #: Called at shutdown, newest first (close clients, stop servers).
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    #: On PostgreSQL, the leadership of each singleton this process takes part in, by name.
    leaders: dict[str, Leadership] = field(default_factory=dict)

    @property
    def ctx(self) -> Context:
        return self.core.ctx

    @property
    def runs(self) -> Runs:
        return self.core.runs

    @property
    def requests(self) -> Requests:
        """Requests from agents Pizza Bot does not run (stateless: the context is all)."""
        return Requests(self.core.ctx)

    @property
    def inbox(self) -> Inbox:
        return self.core.inbox

    @property
    def engine(self) -> Runner | None:
        return self.core.engine

    @property
    def dispatcher(self) -> Dispatcher:
        return self.core.dispatcher

    @property
    def worker(self) -> Worker | None:
        return self.core.worker

    def spawn_singleton(
        self, name: str, work: Callable[[], Coroutine[Any, Any, Any]]
    ) -> asyncio.Task[Any]:
        """Run `work()` in exactly one process of all that share the database (the outbox, the
        scheduler, mail and Slack receivers). On SQLite there is one process: it runs here."""
        if self.store.is_postgres:
            from pizzabot.store.pg import Leadership

            leader = Leadership(self.store.engine, name, work)
            self.leaders[name] = leader
            return self.spawn(leader.run_forever(), f"leader:{name}")
        return self.spawn(work(), name)

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        task.set_name(name)
        self.background.append(task)
        return task
