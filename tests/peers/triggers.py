"""An in-process engine for the trigger tests: SqlStore on SQLite, a clock the test moves, the
scripted model server reached through the model routes (the OpenAI SDK for `openai/`), a
small fake tool hub, and recording channels.

    async with Harness(tmp_path, script, skill={...}) as h:
        run = await h.runs.start("test", "mail Ann", trigger="test", by=Principal.owner("api"))
        await h.drive()                       # step runs until nothing is runnable
        h.clock.advance(hours=2)
        await h.timers.tick(); await h.outbox.drain()
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from pizzabot.agent.channel import RecordingChannel
from pizzabot.agent.context import Context
from pizzabot.agent.engine import Runner
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.llm import LiteLLMClient, ModelRouter
from pizzabot.agent.llm_openai import OpenAIClient
from pizzabot.agent.model import Box, Item
from pizzabot.agent.outbox import Dispatcher
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import Skill, SkillBook
from pizzabot.agent.testing.model_server import ScriptedModelServer
from pizzabot.agent.testing.scripts import Script
from pizzabot.agent.timers import Timers
from pizzabot.agent.tools import ToolOutcome, ToolSpec
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.triggers import TriggerStore

EMAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
    "required": ["to", "subject"],
}


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, when: datetime) -> datetime:
        self.now = when
        return when


@dataclass
class FakeTools:
    """A tool hub with one server "crm" and its `send_email` tool; it records calls."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def list_tools(self, skill: Skill, *, connect: Any = None) -> list[ToolSpec]:
        return [ToolSpec("crm", "send_email", "Send an email.", EMAIL_SCHEMA)]

    async def call(
        self, skill: Skill, server: str, tool: str, args: dict[str, Any], *, ask: Any = None
    ) -> ToolOutcome:
        self.calls.append((f"{server}.{tool}", args))
        return ToolOutcome(f"sent to {args.get('to')}", False, 1.0)

    async def warm(self, skill: Skill) -> None:
        return None

    async def aclose(self) -> None:
        return None


def skill_dict(model_base: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "test",
        "instructions": "You are a test agent.",
        "model": "openai/scripted",
        "model_options": {"api_base": model_base, "api_key": "x"},
        "tools": {"crm.send_email": {"policy": "ask"}},
        "approvers": {"slack": ["U_ANN"], "email": ["ann@example.com"]},
        "deliver": {"slack": "C_TEAM", "email": ["ann@example.com"]},
    }
    out = copy.deepcopy(base)
    out.update(over)
    return out


class Harness:
    def __init__(self, root: Path, script: Script, **skill_over: Any) -> None:
        self.root = root
        self.script = script
        self.skill_over = skill_over
        self.clock = FakeClock()
        self.tools = FakeTools()
        self.slack = RecordingChannel(name="slack")
        self.email = RecordingChannel(name="email")
        self._stack = contextlib.AsyncExitStack()
        counter = itertools.count(1)
        self._ids = lambda: f"id{next(counter):05d}"

    async def __aenter__(self) -> Harness:
        self.model = await self._stack.enter_async_context(ScriptedModelServer(self.script))
        engine = connect(f"sqlite+aiosqlite:///{self.root / 'pizzabot.db'}")
        await upgrade(engine)
        self.store = SqlStore(engine)
        self._stack.push_async_callback(self.store.aclose)
        skill = Skill.model_validate(skill_dict(self.model.openai_base, **self.skill_over))
        self.ctx = Context(
            store=self.store,
            skills=SkillBook({skill.name: skill}),
            clock=self.clock,
            ids=self._ids,
            channels=frozenset({"slack", "email"}),
        )
        model = ModelRouter(
            OpenAIClient(env={}, attempts=1), fallback=LiteLLMClient(env={}, attempts=1)
        )
        self.engine = Runner(self.ctx, model=model, tools=self.tools)
        self.runs = Runs(self.ctx)
        self.inbox = Inbox(self.ctx)
        self.triggers = TriggerStore(self.store)
        self.timers = Timers(self.ctx, self.inbox, self.triggers)
        self.outbox = Dispatcher(self.ctx, {"slack": self.slack, "email": self.email})
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()

    async def drive(self, limit: int = 20) -> None:
        """Claim and step runs until none is runnable (a waiting run is only rows)."""
        for _ in range(limit):
            run = await self.store.claim_run(lease="w1", now=self.clock(), lease_seconds=30)
            if run is None:
                return
            await self.engine.advance(run, lease="w1")
        raise AssertionError("runs kept being runnable")

    async def action_item(self, run_id: str) -> Item:
        items = await self.store.list_items(box=Box.ACTION, run_id=run_id)
        assert items, "no action item"
        return items[0]
