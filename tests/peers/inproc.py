"""The engine in the test's own process: a SqlStore, a worker, the scripted model server and
the test MCP server over stdio, wired by `pizzabot.bot.core.build` as the server wires them. Faster
than a server process, and the clock can be injected.

    async with Engine_(tmp_path, script) as h:
        run = await h.runs.start("test", "go", by=Principal.owner("api"))
        await h.wait(run.id, {"waiting"})
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from pizzabot.agent.channel import RecordingChannel
from pizzabot.agent.context import utcnow
from pizzabot.agent.llm import LiteLLMClient, ModelRouter
from pizzabot.agent.llm_openai import OpenAIClient
from pizzabot.agent.model import Run
from pizzabot.agent.outbox import Limits
from pizzabot.agent.skills import Budget, Skill, SkillBook
from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Script
from pizzabot.agent.tools import ToolHub
from pizzabot.bot.core import Mind, Timing, build
from pizzabot.store.grants import SqlGrants
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.peers.stack import _merge, default_skill
from tests.waiting import eventually


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
        self.tools = ToolHub(env={})
        self._stack.push_async_callback(self.tools.aclose)
        retry: dict[str, Any] = {"attempts": 2, "backoff_min": 0.01, "backoff_max": 0.02}
        model = ModelRouter(OpenAIClient(env={}, **retry), fallback=LiteLLMClient(env={}, **retry))
        self._stack.push_async_callback(model.aclose)
        self.recorded = {name: RecordingChannel(name=name) for name in self.channel_names}
        core = build(
            store=self.store,
            skills=SkillBook({self.skill.name: self.skill}),
            channels=self.recorded,
            mind=Mind(
                model=model,
                tools=self.tools,
                default_budget=self.default_budget,
            ),
            clock=self.clock,
            timing=Timing(poll_interval=0.05, watch_interval=0.2, outbox=Limits(backoff_base=0.01)),
            grants=SqlGrants(self.store.db),
        )
        self.ctx, self.runs, self.inbox = core.ctx, core.runs, core.inbox
        assert core.engine is not None and core.worker is not None
        self.engine, self.worker, self.dispatcher = core.engine, core.worker, core.dispatcher
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
        last: list[str] = []

        async def reached() -> Run | None:
            run = await self.store.get_run(run_id)
            last[:] = [run.status]
            return run if run.status in statuses else None

        return await eventually(
            reached,
            what=f"run {run_id} to be {' or '.join(sorted(statuses))}",
            timeout=timeout,
            context=lambda: f"it is {last}",
        )
