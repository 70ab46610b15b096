"""The engine in the test's own process: a SqlStore, a worker, the scripted model server and
the test MCP server over stdio. Faster than a server process, and the clock can be injected.

    async with Engine_(tmp_path, script) as h:
        run = await h.runs.start("test", "go")
        await h.wait(run.id, {"waiting"})
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from agent.channel import RecordingChannel
from agent.context import Context, utcnow
from agent.engine import Engine
from agent.inbox import Inbox
from agent.llm import LiteLLMClient
from agent.model import Run
from agent.outbox import Dispatcher
from agent.runs import Runs
from agent.skills import Budget, Skill, SkillBook
from agent.testing.model_server import ScriptedModelServer
from agent.testing.scripts import Script
from agent.tools import ToolHub
from agent.worker import Worker
from store.migrate import upgrade
from store.sql import SqlStore, connect
from tests.peers.stack import _merge, default_skill


class InProcess:
    def __init__(
        self,
        root: Path,
        script: Script,
        *,
        skill: dict[str, Any] | None = None,
        db_url: str | None = None,
        clock: Callable[[], datetime] = utcnow,
        default_budget: Budget | None = None,
        channels: tuple[str, ...] = (),
    ) -> None:
        self.root = root
        self.script = script
        self.skill_over = skill or {}
        self.db_url = db_url or f"sqlite+aiosqlite:///{root / 'engine.db'}"
        self.clock = clock
        self.default_budget = default_budget
        self.channel_names = channels
        self.tools_log = root / "tools.jsonl"
        self._stack = contextlib.AsyncExitStack()
        self.recorded: dict[str, RecordingChannel] = {}

    async def __aenter__(self) -> InProcess:
        self.model = await self._stack.enter_async_context(ScriptedModelServer(self.script))
        engine_ = connect(self.db_url)
        await upgrade(engine_)
        self.store = SqlStore(engine_)
        self._stack.push_async_callback(self.store.aclose)
        spec = _merge(
            default_skill(self.model.openai_base, tools_log=self.tools_log), self.skill_over
        )
        self.skill = Skill.model_validate(spec)
        self.ctx = Context(
            store=self.store, skills=SkillBook({self.skill.name: self.skill}), clock=self.clock
        )
        self.tools = ToolHub(env={})
        self._stack.push_async_callback(self.tools.aclose)
        model = LiteLLMClient(env={}, attempts=2, backoff_min=0.01, backoff_max=0.02)
        self.engine = Engine(
            self.ctx,
            model=model,
            tools=self.tools,
            lease_seconds=30,
            default_budget=self.default_budget,
        )
        self.runs = Runs(self.ctx)
        self.inbox = Inbox(self.ctx)
        self.worker = Worker(self.ctx, self.engine, poll_interval=0.05, watch_interval=0.2)
        self.runs.interrupt = self.worker.interrupt
        self.ctx.wake_workers = self.worker.wake
        for name in self.channel_names:
            self.recorded[name] = RecordingChannel(name=name)
        self.dispatcher = Dispatcher(
            self.ctx, dict(self.recorded), backoff_base=0.01, poll_interval=0.05
        )
        self.ctx.channels = frozenset(self.recorded)
        self.ctx.wake_outbox = self.dispatcher.wake
        self._tasks = [
            asyncio.create_task(self.worker.run_forever()),
            asyncio.create_task(self.dispatcher.run_forever()),
        ]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        await self._stack.aclose()

    async def wait(self, run_id: str, statuses: set[str], *, timeout: float = 60.0) -> Run:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = await self.store.get_run(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.05)
        raise AssertionError(f"run {run_id} is {run.status}, not {statuses}")
