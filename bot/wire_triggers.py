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
    if settings.scheduler:
        await scheduler.start()
        svc.spawn(scheduler.run_forever(), "schedules")
        svc.closers.append(scheduler.stop)
    else:
        await scheduler.sync()  # the API still lists the skills' schedules
    timers = Timers(svc.ctx, svc.inbox, triggers, interval=settings.timers_interval)
    svc.extras["timers"] = timers
    svc.spawn(timers.run_forever(), "approval-timers")
