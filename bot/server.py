"""The composition root: build the store, the skills, the engine and the channels from the
settings, and serve them as one FastAPI app.

Nothing slow happens at import or before `/healthz` answers: litellm and the MCP SDK load on
first use, and MCP servers are warmed in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from agent.channel import Channel
from agent.context import Context
from agent.engine import Engine
from agent.inbox import Inbox
from agent.llm import LiteLLMClient
from agent.outbox import Dispatcher
from agent.runs import Runs
from agent.skills import HttpServer, Skill, SkillBook, StdioServer, load_skills
from agent.tools import ToolHub
from agent.worker import Worker
from bot import demo
from bot.api import install_error_handlers, router
from bot.services import Services
from bot.settings import Settings, environment
from store.migrate import upgrade
from store.sql import SqlStore, connect

log = logging.getLogger("pizzabot")

#: Hooks that add channels: each gets the services and returns (name, Channel) or None, and may
#: mount routes or start receivers. The Slack, email and web channels register here.
ChannelFactory = Callable[[Services, FastAPI], Any]
CHANNEL_FACTORIES: list[ChannelFactory] = []


def folder_servers(skill: Skill) -> dict[str, StdioServer | HttpServer]:
    """A skill with granted folders gets the built-in `files` server for exactly those."""
    if not skill.folders:
        return {}
    from agent.files_mcp import launch_args

    return {"files": StdioServer(command="python", args=launch_args(skill.folders))}


async def build(settings: Settings, *, token: str, with_worker: bool | None = None) -> Services:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine_ = connect(settings.db_url)
    await upgrade(engine_)
    store = SqlStore(engine_)
    report = load_skills(settings.skills_dir)
    for err in report.errors:
        log.error("skill not loaded: %s", err)
    ctx = Context(store=store, skills=SkillBook(report.skills), base_url=settings.base_url)
    env = environment()
    tools = ToolHub(env=env, call_timeout=settings.tool_timeout, extra_servers=folder_servers)
    model = LiteLLMClient(
        env=env,
        attempts=settings.model_attempts,
        timeout=settings.model_timeout,
        on_import=demo.register,
    )
    engine = Engine(ctx, model=model, tools=tools, lease_seconds=settings.lease_seconds)
    runs = Runs(ctx)
    inbox = Inbox(ctx)
    dispatcher = Dispatcher(ctx, {}, poll_interval=settings.poll_interval)
    worker = None
    if settings.worker if with_worker is None else with_worker:
        worker = Worker(
            ctx,
            engine,
            concurrency=settings.worker_concurrency,
            poll_interval=settings.poll_interval,
        )
        runs.interrupt = worker.interrupt
        ctx.wake_workers = worker.wake
    ctx.wake_outbox = dispatcher.wake
    now = ctx.clock()
    for name, path in report.paths.items():
        await store.audit(
            action="skill_loaded",
            actor="server",
            channel="server",
            now=now,
            detail={"skill": name, "path": str(path)},
        )
    if store.engine.dialect.name == "sqlite" and worker is not None:
        await store.release_leases(now=now)
    return Services(
        settings=settings,
        token=token,
        store=store,
        ctx=ctx,
        runs=runs,
        inbox=inbox,
        engine=engine,
        tools=tools,
        dispatcher=dispatcher,
        worker=worker,
        load_report=report,
    )


def add_channel(svc: Services, channel: Channel) -> None:
    svc.dispatcher.channels[channel.name] = channel
    svc.ctx.channels = frozenset(svc.dispatcher.channels)


def create_app(settings: Settings, *, token: str, with_worker: bool | None = None) -> FastAPI:
    tasks: list[asyncio.Task[Any]] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = await build(settings, token=token, with_worker=with_worker)
        app.state.services = svc
        for factory in CHANNEL_FACTORIES:
            await factory(svc, app)
        tasks.append(asyncio.create_task(svc.dispatcher.run_forever(), name="outbox"))
        if svc.worker is not None:
            tasks.append(asyncio.create_task(svc.worker.run_forever(), name="worker"))
        tasks.append(asyncio.create_task(_warm(svc), name="warm-mcp"))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
            if svc.worker is not None:
                await svc.worker.stop()
            for channel in list(svc.dispatcher.channels.values()):
                with contextlib.suppress(Exception):
                    await channel.aclose()
            await svc.tools.aclose()
            await svc.store.aclose()

    app = FastAPI(title="Pizza Bot", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router())

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        return JSONResponse({"ok": True})

    return app


async def _warm(svc: Services) -> None:
    """Start every skill's MCP servers in the background, so the first run does not wait."""
    for skill in svc.ctx.skills.all():
        try:
            await svc.tools.warm(skill)
        except Exception as exc:
            log.warning("skill %s: MCP servers not ready yet: %s", skill.name, exc)
