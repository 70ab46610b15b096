"""The composition root: build the store, the skills, the engine and the channels from the
settings, and serve them as one FastAPI app.

Nothing slow happens at import or before `/healthz` answers: litellm and the MCP SDK load on
first use, and MCP servers are warmed in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from agent.channel import Channel
from agent.context import Context
from agent.engine import Engine
from agent.inbox import Inbox
from agent.llm import LiteLLMClient
from agent.outbox import Dispatcher
from agent.redaction import Redactor
from agent.runs import Runs
from agent.skills import HttpServer, Reload, Skill, SkillBook, StdioServer, load_skills
from agent.tools import ToolHub
from agent.worker import Worker
from bot import demo, tracing
from bot.api import install_error_handlers, router
from bot.services import Services
from bot.settings import Settings, environment, private_folder
from bot.skill_reload import SkillFiles
from store.migrate import upgrade
from store.sql import SqlStore, connect

log = logging.getLogger("pizzabot")


class Wire(Protocol):
    """A module that plugs one capability (a channel, the triggers) into the app.

    `install` runs when the app is made (routes, middleware); `start` runs in the lifespan,
    with the built services (channels via `add_channel`, receivers via `svc.spawn`).
    """

    def install(self, app: FastAPI, settings: Settings) -> None: ...

    async def start(self, svc: Services, app: FastAPI) -> None: ...


def wires() -> list[Wire]:
    from bot import wire_email, wire_slack, wire_triggers, wire_web

    return [wire_web, wire_slack, wire_email, wire_triggers]  # type: ignore[list-item]


def folder_servers(skill: Skill) -> dict[str, StdioServer | HttpServer]:
    """A skill with granted folders gets the built-in `files` server for exactly those."""
    if not skill.folders:
        return {}
    from bot.files_server import launch_args

    return {"files": StdioServer(command="python", args=launch_args(skill.folders))}


async def build(settings: Settings, *, token: str, with_worker: bool | None = None) -> Services:
    private_folder(settings.data_dir)
    engine_ = connect(settings.db_url)
    schema_change = await upgrade(engine_)
    store = SqlStore(engine_)
    report = load_skills(settings.skills_dir)
    for err in report.errors:
        log.error("skill file refused: %s", err)
    ctx = Context(store=store, skills=SkillBook.of(report), base_url=settings.base_url)
    env = environment()
    tools = ToolHub(env=env, call_timeout=settings.tool_timeout, extra_servers=folder_servers)
    # The API token and every secret setting: a provider's, a tool's, Slack's or an SMTP
    # server's error must not show them.
    redactor = Redactor.of(token, *settings.secret_values())
    model = LiteLLMClient(
        env=env,
        attempts=settings.model_attempts,
        timeout=settings.model_timeout,
        on_import=demo.register,
        redactor=redactor,
    )
    engine = Engine(
        ctx,
        model=model,
        tools=tools,
        lease_seconds=settings.lease_seconds,
        default_budget=settings.default_budget(),
        redactor=redactor,
    )
    runs = Runs(ctx)
    inbox = Inbox(ctx)
    dispatcher = Dispatcher(ctx, {}, poll_interval=settings.poll_interval, redactor=redactor)
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
    tracer_provider = tracing.install(ctx, env) if settings.otel else None
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
    svc = Services(
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
        skill_files=SkillFiles(
            folder=settings.skills_dir,
            book=ctx.skills,
            report=report,
            store=store,
            clock=ctx.clock,
            interval=settings.skills_watch,
        ),
        schema_change=schema_change,
    )
    if tracer_provider is not None:

        async def flush() -> None:
            tracer_provider.shutdown()

        svc.closers.append(flush)
    return svc


def add_channel(svc: Services, channel: Channel) -> None:
    svc.dispatcher.channels[channel.name] = channel
    svc.ctx.channels = frozenset(svc.dispatcher.channels)


def create_app(settings: Settings, *, token: str, with_worker: bool | None = None) -> FastAPI:
    plugged = wires()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = await build(settings, token=token, with_worker=with_worker)
        app.state.services = svc
        try:
            for wire in plugged:
                await wire.start(svc, app)
            svc.spawn_singleton("outbox", svc.dispatcher.run_forever)
            if svc.worker is not None:
                start_worker(svc, svc.worker)
            svc.spawn(warm(svc), "warm-mcp")
            follow_skill_files(svc)
            yield
        finally:
            await shutdown(svc)

    app = FastAPI(title="Pizza Bot", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(router())

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        """Liveness: the process answers (see bot.boot for the answer while starting)."""
        return JSONResponse({"ok": True, "ready": True})

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        """Readiness: the app is built and started; the API, the channels and the worker run."""
        return JSONResponse({"ok": True, "ready": True})

    for wire in plugged:
        wire.install(app, settings)
    guard(app, settings, token=token)
    return app


def guard(app: FastAPI, settings: Settings, *, token: str) -> None:
    """Checks that come before any route reads the body (see bot.http_guard); the last one
    added runs first: the token, then the size and time limits, then Slack's signature."""
    from bot.http_guard import BodyLimit, Limits, SlackSignatureGate, TokenGate
    from bot.wire_slack import EVENTS_PATH

    secret = settings.slack_signing_secret
    if settings.slack_mode == "http" and secret is not None and secret.get_secret_value():
        app.add_middleware(
            SlackSignatureGate, signing_secret=secret.get_secret_value(), path=EVENTS_PATH
        )
    limits = Limits(
        max_bytes=settings.max_body_bytes,
        per_prefix=(("/hooks/", settings.webhook_max_bytes),),
        body_timeout=settings.body_timeout,
    )
    app.add_middleware(BodyLimit, limits=limits)
    app.add_middleware(TokenGate, token=token)


def follow_skill_files(svc: Services) -> None:
    """Reload the skills when their files change (each process watches its own folder), and
    bring what the skills declare along: schedules at once, MCP servers warmed."""

    async def after(change: Reload) -> None:
        scheduler = svc.extras.get("scheduler")
        if scheduler is not None:
            await scheduler.sync()
        for name in [*change.added, *change.changed]:
            if name in svc.ctx.skills:
                svc.spawn(warm_skill(svc, svc.ctx.skills.get(name)), f"warm-mcp:{name}")

    svc.skill_files.listeners.append(after)
    if svc.skill_files.interval > 0:
        svc.spawn(svc.skill_files.watch(), "skills-watch")


def start_worker(svc: Services, worker: Worker) -> None:
    svc.spawn(worker.run_forever(), "worker")
    if svc.store.is_postgres:
        from store.pg import RunListener

        svc.spawn(RunListener(svc.store.engine, worker.wake).run_forever(), "listen")


async def shutdown(svc: Services) -> None:
    for task in svc.background:
        task.cancel()
    for task in svc.background:
        with contextlib.suppress(BaseException):
            await task
    if svc.worker is not None:
        await svc.worker.stop()
    for closer in reversed(svc.closers):
        with contextlib.suppress(Exception):
            await closer()
    for channel in list(svc.dispatcher.channels.values()):
        with contextlib.suppress(Exception):
            await channel.aclose()
    await svc.tools.aclose()
    await svc.store.aclose()


async def warm(svc: Services) -> None:
    """Load litellm and start every skill's MCP servers in the background, so the first run
    does not wait for them (and `/healthz` never does)."""
    from agent.llm import import_litellm

    await asyncio.sleep(0.2)  # let the server take its first requests before the heavy import
    await asyncio.to_thread(import_litellm)
    for skill in svc.ctx.skills.all():
        await warm_skill(svc, skill)


async def warm_skill(svc: Services, skill: Skill) -> None:
    try:
        await svc.tools.warm(skill)
    except Exception as exc:
        log.warning("skill %s: MCP servers not ready yet: %s", skill.name, exc)
