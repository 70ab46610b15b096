"""The composition root: build the store, the skills, the engine and the channels from the
settings, and serve them as one FastAPI app.

`build` is the one place that reads the settings into parts; the engine's own wiring is
`pizzabot.bot.core.build`, which the worker process and the tests' harnesses use too. Each part gets
its collaborators when it is made, and each capability's module (`pizzabot.bot.wire_*`) makes its
parts and starts its loops when asked; none of them imports this module back.

Nothing slow happens at import or before `/healthz` answers: the model libraries (the OpenAI
SDK, litellm only when a skill needs it) and the MCP SDK load on first use, and the warm-up
loads them and starts the MCP servers in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from pizzabot.agent import warmup
from pizzabot.agent.context import utcnow
from pizzabot.agent.llm import LiteLLMClient, ModelRouter
from pizzabot.agent.llm_demo import DemoModel
from pizzabot.agent.llm_openai import OpenAIClient
from pizzabot.agent.outbox import Limits
from pizzabot.agent.policy import Principal
from pizzabot.agent.policy.tokens import TokenDesk, principal_for
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.skills import LoadReport, Reload, SkillBook, load_skills
from pizzabot.agent.tools_mcp import ToolHub
from pizzabot.agent.tracing import flusher
from pizzabot.agent.worker import Worker
from pizzabot.bot import (
    tracing,
    wire_chats,
    wire_digest,
    wire_email,
    wire_http,
    wire_slack,
    wire_triggers,
    wire_web,
)
from pizzabot.bot.core import Mind, Timing
from pizzabot.bot.core import build as build_core
from pizzabot.bot.mcp_servers import tool_hub
from pizzabot.bot.outlets import outlets
from pizzabot.bot.services import Services
from pizzabot.bot.settings import Settings, environment, private_folder
from pizzabot.bot.skill_reload import SkillFiles
from pizzabot.channels.a2a import serve as a2a
from pizzabot.channels.mcp import http as mcp_http
from pizzabot.store.approvals import SqlApprovals
from pizzabot.store.away import away_access
from pizzabot.store.chain import ensure_key, keep_checkpointing
from pizzabot.store.grants import SqlGrants
from pizzabot.store.mcp_consents import SqlConsents
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.tokens import SqlTokens

if TYPE_CHECKING:
    pass

log = logging.getLogger("pizzabot")


async def build(
    settings: Settings,
    *,
    token: str,
    with_worker: bool | None = None,
    serving: bool = True,
    tools: ToolHub | None = None,
) -> Services:
    """Every part of a server from its settings, each handed what it needs as it is made.
    `serving`: this process delivers on the channels and answers them (a server); without
    it (`pizzabot worker`) it only steps runs, addressing items to the channels the
    settings turn on, which its servers deliver on. `tools`: the hub whose MCP servers were
    started first (`pizzabot.bot.mcp_servers.start_first`); the services own it from here."""
    private_folder(settings.data_dir)
    store, schema_change = await _open_store(settings)
    tools = tools if tools is not None else tool_hub(settings, environment())
    if tools.auth is not None:  # OAuth consents in the database: a callback reaches any server
        tools.auth.consents = SqlConsents(store.db)
    try:
        svc = await _assemble(
            settings,
            store,
            token=token,
            with_worker=with_worker,
            serving=serving,
            schema_change=schema_change,
            tools=tools,
        )
        await warmup.load_libraries(svc.ctx.skills.all(), tools=svc.tools)
        return svc
    except BaseException:
        await store.aclose()  # a setting refused (a short mail key, say): nothing stays open
        raise


async def _assemble(
    settings: Settings,
    store: SqlStore,
    *,
    token: str,
    with_worker: bool | None,
    serving: bool,
    schema_change: str | None,
    tools: ToolHub,
) -> Services:
    files = _skill_files(settings, store)
    # One policy for every channel: who may decide, start and follow up, and through which.
    access = away_access(files.book, store.db, email_senders=settings.email_allowed_senders)
    env = environment()
    redactor = Redactor.of(token, *settings.secret_values())  # no error shows a secret
    tracer = tracing.exporter(env) if settings.otel else None
    out = outlets(settings, store, access, files.book, serving)
    home_bell = asyncio.Event()  # Slack's Home tabs are republished whenever the outbox wakes
    model = _models(settings, env=env, redactor=redactor)
    mind = Mind(model=model, tools=tools, default_budget=settings.default_budget())
    core = build_core(
        store=store,
        skills=files.book,
        channels={c.name: c for c in out.channels},
        reach=out.addressed,
        mind=mind,
        with_worker=settings.worker if with_worker is None else with_worker,
        outbox_listeners=(home_bell.set, out.live.ring),
        on_run_end=tracing.run_end_hook(store, tracer) if tracer is not None else None,
        **_engine_settings(settings, store, redactor),
        access=access,
        step_up=out.phone.passkeys,
    )
    await _audit_skills(store, files.report, now=utcnow())
    if not store.is_postgres and core.worker is not None:
        await store.release_leases(now=utcnow())
    tokens = SqlTokens(store.db)  # named tokens, made and revoked by admins through the desk
    desk = TokenDesk(tokens=tokens, access=access, trail=store, clock=utcnow, ids=core.ctx.ids)
    return Services(
        settings=settings,
        token=token,
        store=store,
        core=core,
        access=access,
        tokens=tokens,
        token_desk=desk,
        tools=tools,
        skill_files=files,
        schema_change=schema_change,
        slack=wire_slack.build(
            settings, channel=out.slack, core=core, store=store, access=access, bell=home_bell
        ),
        email=wire_email.build(settings, outlet=out.mail, core=core, store=store, access=access),
        triggers=wire_triggers.build(settings, store=store, core=core) if serving else None,
        phone=out.phone,
        live=out.live,
        chats=wire_chats.build(settings, out.channels, core=core, store=store, access=access),
        closers=[*([flusher(tracer)] if tracer is not None else []), model.aclose],
    )


class EngineParts(TypedDict):
    """The engine's parts that come from the settings and the store."""

    clock: Callable[[], datetime]
    base_url: str
    redactor: Redactor
    timing: Timing
    grants: SqlGrants
    approvals: SqlApprovals


def _engine_settings(settings: Settings, store: SqlStore, redactor: Redactor) -> EngineParts:
    """What the engine is handed from the settings and the store, whatever the channels."""
    return EngineParts(
        clock=utcnow,
        base_url=settings.base_url,
        redactor=redactor,
        timing=_timing(settings),
        grants=SqlGrants(store.db),
        approvals=SqlApprovals(store.db),
    )


async def _open_store(settings: Settings) -> tuple[SqlStore, str | None]:
    """The store, its schema brought up to date; and what that did (None: nothing)."""
    engine = connect(settings.db_url)
    schema_change = await upgrade(engine)
    return SqlStore(engine), schema_change


def _skill_files(settings: Settings, store: SqlStore) -> SkillFiles:
    """The skills folder, loaded; a refused file is logged, and its skill is not there."""
    report = load_skills(settings.skills_dir)
    for err in report.errors:
        log.error("skill file refused: %s", err)
    return SkillFiles(
        folder=settings.skills_dir,
        book=SkillBook.of(report),
        report=report,
        store=store,
        clock=utcnow,
        interval=settings.skills_watch,
    )


def _timing(settings: Settings) -> Timing:
    return Timing(
        poll_interval=settings.poll_interval,
        concurrency=settings.worker_concurrency,
        lease_seconds=settings.lease_seconds,
        outbox=Limits(
            attempt_timeout=settings.outbox_attempt_timeout,
            concurrency=settings.outbox_concurrency,
            max_attempts=settings.outbox_max_attempts,
            backoff_base=settings.outbox_backoff_base,
            backoff_max=settings.outbox_backoff_max,
            retry_after_max=settings.outbox_retry_after_max,
        ),
    )


def _models(settings: Settings, *, env: dict[str, str], redactor: Redactor) -> ModelRouter:
    """The model routes: the demo, OpenAI's SDK for `openai/` models it can serve, and
    litellm for every other model (each imported only when a skill needs it)."""
    attempts, timeout = settings.model_attempts, settings.model_timeout
    return ModelRouter(
        DemoModel(),
        OpenAIClient(env=env, redactor=redactor, attempts=attempts, timeout=timeout),
        fallback=LiteLLMClient(env=env, redactor=redactor, attempts=attempts, timeout=timeout),
    )


async def _audit_skills(store: SqlStore, report: LoadReport, *, now: datetime) -> None:
    for name, path in report.paths.items():
        await store.audit(
            action="skill_loaded",
            actor="server",
            channel="server",
            now=now,
            detail={"skill": name, "path": str(path)},
        )


def create_app(
    settings: Settings,
    *,
    token: str,
    with_worker: bool | None = None,
    tools: ToolHub | None = None,
) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = await build(settings, token=token, with_worker=with_worker, tools=tools)
        app.state.services = svc
        app.state.api = wire_http.deps(svc)
        app.state.hooks = wire_triggers.hook_deps(settings, svc)
        app.state.mcp = mcp_http.McpDeps(requests=svc.requests, spawn=svc.spawn)
        try:
            await start(svc)
            yield
        finally:
            await shutdown(svc)

    app = FastAPI(title="Pizza Bot", version="0.1.0", lifespan=lifespan)
    wire_http.install(app)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        """Liveness: the process answers (see bot.boot for the answer while starting)."""
        return JSONResponse({"ok": True, "ready": True})

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        """Readiness: the app is built and started; the API, the channels and the worker run."""
        return JSONResponse({"ok": True, "ready": True})

    wire_web.install(app, settings)
    wire_slack.install(app, settings)
    wire_email.install(app, settings)
    wire_chats.install(app, settings)
    wire_triggers.install(app)
    mcp_http.install(
        app,
        mcp_http.McpConfig(
            skill=settings.mcp_skill,
            host=settings.host,
            public_url=settings.public_url or "",
            max_body_bytes=settings.max_body_bytes,
        ),
    )
    guard(app, settings, token=token)
    if settings.a2a_skill:  # after guard: its token gate runs before the body limit
        a2a.install(app, skill=settings.a2a_skill, base_url=settings.base_url, owner_token=token)
    return app


async def start(svc: Services) -> None:
    """Start what the server runs: the channels' receivers, the triggers, the outbox, the
    worker, and the watch on the skills folder."""
    if svc.slack is not None:
        wire_slack.start(svc, svc.slack)
    if svc.email is not None:
        wire_email.start(svc, svc.email)
    wire_chats.start(svc)
    if svc.triggers is not None:
        await wire_triggers.start(svc, svc.triggers)
    wire_digest.start(svc)
    svc.spawn_singleton("outbox", svc.dispatcher.run_forever)
    key, every = ensure_key(svc.settings.audit_key_path), svc.settings.audit_checkpoint_every
    svc.spawn_singleton(
        "audit-checkpoints",
        lambda: keep_checkpointing(
            svc.store.db, key=key, every=every, clock=utcnow, sleep=asyncio.sleep
        ),
    )
    if svc.worker is not None:
        start_worker(svc, svc.worker)
    elif svc.store.is_postgres:
        listen_for_decisions(svc, None)
    svc.spawn(warm(svc), "warm-mcp")
    follow_skill_files(svc)


def guard(app: FastAPI, settings: Settings, *, token: str) -> None:
    """Checks that come before any route reads the body (see channels.http.guard); the last one
    added runs first: the token, then the size and time limits, then Slack's signature."""
    from pizzabot.channels.http.guard import BodyLimit, Limits, SlackSignatureGate, TokenGate

    secret = settings.slack_signing_secret
    if settings.slack_mode == "http" and secret is not None and secret.get_secret_value():
        app.add_middleware(
            SlackSignatureGate,
            signing_secret=secret.get_secret_value(),
            path=wire_slack.EVENTS_PATH,
        )
    limits = Limits(
        max_bytes=settings.max_body_bytes,
        per_prefix=(("/hooks/", settings.webhook_max_bytes),),
        body_timeout=settings.body_timeout,
    )
    app.add_middleware(BodyLimit, limits=limits)

    async def resolve(presented: str, channel: str) -> Principal | None:
        # The services are built in the lifespan, after the app: looked up when asked.
        svc: Services | None = getattr(app.state, "services", None)
        tokens = svc.tokens if svc is not None else None
        return await principal_for(presented, owner_secret=token, tokens=tokens, channel=channel)

    app.add_middleware(TokenGate, resolve=resolve)
    app.add_middleware(TokenGate, resolve=resolve, prefix=mcp_http.MCP_PATH + "/", channel="mcp")


def follow_skill_files(svc: Services) -> None:
    """Reload the skills when their files change (each process watches its own folder), and
    bring what the skills declare along: schedules at once, MCP servers warmed, and the
    servers of a removed or changed skill stopped."""

    async def after(change: Reload) -> None:
        if svc.triggers is not None:
            await svc.triggers.scheduler.sync()
        if change.removed or change.changed:
            await svc.tools.retain(svc.ctx.skills.all())  # no server outlives its skill
        for name in [*change.added, *change.changed]:
            if name in svc.ctx.skills:
                skill = svc.ctx.skills.get(name)
                svc.spawn(warmup.warm_skill(svc.tools, skill), f"warm-mcp:{name}")

    svc.skill_files.listeners.append(after)
    if svc.skill_files.interval > 0:
        svc.spawn(svc.skill_files.watch(), "skills-watch")


def start_worker(svc: Services, worker: Worker) -> None:
    svc.spawn(worker.run_forever(), "worker")
    if svc.store.is_postgres:
        listen_for_decisions(svc, worker)


def listen_for_decisions(svc: Services, worker: Worker | None) -> None:
    """With PostgreSQL, another process's decision (a re-queued run) is announced on the
    runs channel: wake the worker, whoever waits here on that run, and the web's held asks."""
    from pizzabot.store.pg import RunListener

    bell = svc.ctx.decisions

    def woken(run_id: str | None) -> None:
        if worker is not None:
            worker.wake()
        bell.ring(run_id)
        svc.live.ring()

    svc.spawn(RunListener(svc.store.engine, woken).run_forever(), "listen")


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
    """The skills' model libraries and MCP servers, in the background (`agent.warmup`)."""
    model = svc.engine.model if svc.engine is not None else None
    await warmup.warm(svc.ctx.skills.all(), model=model, tools=svc.tools)
