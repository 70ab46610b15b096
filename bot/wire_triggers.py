"""Plugs schedules, webhooks and approval time-outs into the app: routes at creation, the
scheduler and the timers loop in the lifespan.

`svc.extras["scheduler"]` is the `bot.scheduler.Scheduler` (the schedules API and the web
page read it); `svc.extras["timers"]` is the `agent.timers.Timers` loop.
"""

from __future__ import annotations

from fastapi import FastAPI

from agent.timers import Timers
from bot import hooks, schedules_api
from bot.scheduler import Scheduler
from bot.services import Services
from bot.settings import Settings
from store.triggers import TriggerStore


def install(app: FastAPI, settings: Settings) -> None:
    app.include_router(schedules_api.router())
    app.include_router(
        hooks.router(max_bytes=settings.webhook_max_bytes, tolerance=settings.webhook_tolerance)
    )


async def start(svc: Services, app: FastAPI) -> None:
    settings = svc.settings
    triggers = TriggerStore(svc.store)
    scheduler = Scheduler(
        runs=svc.runs,
        triggers=triggers,
        skills=svc.ctx.skills,
        clock=svc.ctx.clock,
        grace_seconds=settings.schedule_misfire_grace,
        sync_interval=settings.schedule_sync_interval,
    )
    svc.extras["scheduler"] = scheduler
    await scheduler.sync()  # the API lists the skills' schedules on every server
    if settings.scheduler:

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
    timers = Timers(svc.ctx, svc.inbox, triggers, interval=settings.timers_interval)
    svc.extras["timers"] = timers
    svc.spawn_singleton("approval-timers", timers.run_forever)
