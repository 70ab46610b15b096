"""Plugs schedules, webhooks and approval time-outs into the app: routes at creation, the
scheduler and the timers loop in the lifespan (`Services.triggers` holds both).
"""

from __future__ import annotations

from fastapi import FastAPI

from pizzabot.agent.timers import Timers
from pizzabot.bot.core import Core
from pizzabot.bot.services import Services, TriggerParts
from pizzabot.bot.settings import Settings, environment
from pizzabot.channels.triggers import hooks
from pizzabot.channels.triggers.scheduler import Scheduler
from pizzabot.store.sql import SqlStore
from pizzabot.store.triggers import TriggerStore


def install(app: FastAPI) -> None:
    app.include_router(hooks.router)


def hook_deps(settings: Settings, svc: Services) -> hooks.HookDeps:
    """What the webhook receiver needs from the running server."""
    return hooks.HookDeps(
        runs=svc.runs,
        skills=svc.ctx.skills,
        signatures=TriggerStore(svc.store),
        secret=lambda name: environment().get(name, ""),
        max_bytes=settings.webhook_max_bytes,
        tolerance=settings.webhook_tolerance,
    )


def build(settings: Settings, *, store: SqlStore, core: Core) -> TriggerParts:
    triggers = TriggerStore(store)
    scheduler = Scheduler(
        runs=core.runs,
        triggers=triggers,
        audit=store,
        skills=core.ctx.skills,
        clock=core.ctx.clock,
        grace_seconds=settings.schedule_misfire_grace,
        sync_interval=settings.schedule_sync_interval,
    )
    timers = Timers(core.ctx, core.inbox, triggers, interval=settings.timers_interval)
    core.ctx.wake_timers = timers.wake  # a new item's time-out is kept on time
    return TriggerParts(scheduler=scheduler, timers=timers)


async def start(svc: Services, parts: TriggerParts) -> None:
    scheduler = parts.scheduler
    await scheduler.sync()  # the API lists the skills' schedules on every server
    if svc.settings.scheduler:

        async def schedules() -> None:
            # Fires are unique in the database, so two schedulers could not double a run;
            # one leader keeps the work (and the APScheduler jobs) in one place all the same.
            await scheduler.start()
            try:
                await scheduler.run_forever()
            finally:
                await scheduler.stop()

        svc.spawn_singleton("schedules", schedules)
        svc.closers.append(scheduler.stop)
    svc.spawn_singleton("approval-timers", parts.timers.run_forever)
