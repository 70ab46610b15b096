"""The engine's running parts, each made once and handed its collaborators when it is made.

The server, the `pizzabot worker` process and the tests' in-process harnesses all get their
context, runs, inbox, engine, worker and outbox dispatcher from `build`, so this wiring
exists once. What needs what:

    Context ── rings ──▶ bells ◀── sleep on ── Worker, Dispatcher (and Slack's Home tabs)
    Runs ── interrupt ──▶ Worker ──▶ Runner ──▶ Context

The context rings the loops awake (a decision, a new item), yet the loops need the context
to be made. The bells (`asyncio.Event`s) are made first and handed to both sides, so nothing
is set on an object after it was made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from pizzabot.agent.bell import Bell
from pizzabot.agent.channel import Channel
from pizzabot.agent.context import Context, utcnow
from pizzabot.agent.engine import Runner
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.llm import ModelClient
from pizzabot.agent.outbox import Dispatcher, Limits
from pizzabot.agent.policy.access import Access
from pizzabot.agent.policy.grants import Grants
from pizzabot.agent.policy.quorum import Approvals
from pizzabot.agent.preview import previewer_for
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import Budget, SkillBook
from pizzabot.agent.step_up import Confirmer
from pizzabot.agent.store import Store
from pizzabot.agent.tools import Tools
from pizzabot.agent.worker import Worker

__all__ = ["Core", "Mind", "Timing", "build", "ring"]


@dataclass(frozen=True)
class Timing:
    """How often the loops look and retry; tests make them quick."""

    #: Seconds a worker or the outbox sleeps when nobody woke it (the safety net).
    poll_interval: float = 2.0
    #: Seconds between a worker's looks for cancels and the kill switch.
    watch_interval: float = 1.0
    #: Runs one worker steps at a time.
    concurrency: int = 8
    #: Seconds a claimed run stays this worker's without a renewal.
    lease_seconds: float = 30.0
    #: What one delivery may cost the outbox: its deadline, lanes, backoff, dead letter.
    outbox: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Mind:
    """What the engine thinks and acts with: a model route and the tools (MCP, in the server)."""

    model: ModelClient
    tools: Tools
    default_budget: Budget | None = None


@dataclass(frozen=True)
class Core:
    ctx: Context
    runs: Runs
    inbox: Inbox
    dispatcher: Dispatcher
    #: None where nothing steps runs (a process that only serves, a channel harness).
    engine: Runner | None
    worker: Worker | None


def ring(*calls: Callable[[], None]) -> Callable[[], None]:
    """A wake-up call that makes every one of `calls` (an event's `set`, a bell's `ring`)."""

    def wake() -> None:
        for call in calls:
            call()

    return wake


def _stepping(
    ctx: Context,
    mind: Mind | None,
    with_worker: bool,
    bell: asyncio.Event,
    redactor: Redactor | None,
    timing: Timing,
) -> tuple[Runner | None, Worker | None]:
    """The engine (given a mind) and the worker that steps runs with it (when asked for)."""
    if mind is None:
        return None, None
    engine = Runner(
        ctx,
        model=mind.model,
        tools=mind.tools,
        lease_seconds=timing.lease_seconds,
        default_budget=mind.default_budget,
        redactor=redactor,
    )
    if not with_worker:
        return engine, None
    worker = Worker(
        ctx,
        engine,
        concurrency=timing.concurrency,
        poll_interval=timing.poll_interval,
        watch_interval=timing.watch_interval,
        wake=bell,
    )
    return engine, worker


def build(
    *,
    store: Store,
    skills: SkillBook,
    channels: Mapping[str, Channel],
    mind: Mind | None,
    with_worker: bool = True,
    reach: frozenset[str] | None = None,
    outbox_listeners: tuple[Callable[[], None], ...] = (),
    clock: Callable[[], datetime] = utcnow,
    base_url: str = "",
    redactor: Redactor | None = None,
    on_run_end: Callable[[str], Awaitable[None]] | None = None,
    timing: Timing = Timing(),
    grants: Grants | None = None,
    approvals: Approvals | None = None,
    access: Access | None = None,
    step_up: Confirmer | None = None,
) -> Core:
    """Wire the engine's parts. `channels` are the ones this process delivers on; `reach`
    the ones items are addressed to (default: the same; a process that only steps runs
    addresses items to the channels its servers deliver on). `outbox_listeners` are called
    whenever the outbox is rung. Without a `mind` nothing steps runs here."""
    workers_bell, outbox_bell, decisions = asyncio.Event(), asyncio.Event(), Bell()

    ctx = Context(
        store=store,
        skills=skills,
        clock=clock,
        wake_workers=workers_bell.set,
        wake_outbox=ring(outbox_bell.set, *outbox_listeners),
        channels=frozenset(channels) if reach is None else reach,
        base_url=base_url,
        on_run_end=on_run_end,
        grants=grants,
        approvals=approvals,
        decisions=decisions,
        access=access or Access(skills=skills),
        step_up=step_up,
        previews=previewer_for(mind.tools if mind is not None else None, redactor),
    )
    engine, worker = _stepping(ctx, mind, with_worker, workers_bell, redactor, timing)
    dispatcher = Dispatcher(
        ctx,
        dict(channels),
        limits=timing.outbox,
        poll_interval=timing.poll_interval,
        redactor=redactor,
        wake=outbox_bell,
    )
    store.hand_over_to(worker)  # runs started or decided here go to this process's worker
    runs = Runs(ctx, interrupt=worker.interrupt if worker is not None else None)
    return Core(
        ctx=ctx, runs=runs, inbox=Inbox(ctx), dispatcher=dispatcher, engine=engine, worker=worker
    )
