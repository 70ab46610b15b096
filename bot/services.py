"""The running server's parts, wired together: what `bot.server` builds and the routes use."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from agent.context import Context
from agent.engine import Engine
from agent.inbox import Inbox
from agent.outbox import Dispatcher
from agent.runs import Runs
from agent.tools import ToolHub
from agent.worker import Worker
from bot.settings import Settings
from bot.skill_reload import SkillFiles
from store.sql import SqlStore


@dataclass
class Services:
    settings: Settings
    token: str
    store: SqlStore
    ctx: Context
    runs: Runs
    inbox: Inbox
    engine: Engine
    tools: ToolHub
    dispatcher: Dispatcher
    worker: Worker | None
    #: The skills folder: what the last load refused, and reloading it.
    skill_files: SkillFiles
    #: What starting did to the database ("created (schema 0006)"), None when nothing.
    schema_change: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    #: Long-lived tasks (receivers, loops) cancelled at shutdown.
    background: list[asyncio.Task[Any]] = field(default_factory=list)
    #: Called at shutdown, newest first (close clients, stop servers).
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def spawn_singleton(
        self, name: str, work: Callable[[], Coroutine[Any, Any, Any]]
    ) -> asyncio.Task[Any]:
        """Run `work()` in exactly one process of all that share the database (the outbox, the
        scheduler, mail and Slack receivers). On SQLite there is one process: it runs here."""
        if self.store.is_postgres:
            from store.pg import Leadership

            leader = Leadership(self.store.engine, name, work)
            self.extras.setdefault("leaders", {})[name] = leader
            return self.spawn(leader.run_forever(), f"leader:{name}")
        return self.spawn(work(), name)

    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        task.set_name(name)
        self.background.append(task)
        return task
