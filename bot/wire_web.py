"""Plugs the web inbox (channels/web) into the app: routes at creation, receivers in the lifespan.

The router reads the running services per request (they exist only once the lifespan has
started), so nothing needs stashing at start.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles

from bot.services import Services
from bot.settings import Settings
from channels.web import STATIC_DIR, WebDeps, web_router


def _deps(request: Request) -> WebDeps:
    svc: Services = request.app.state.services
    scheduler = svc.extras.get("scheduler")
    return WebDeps(
        store=svc.store,
        inbox=svc.inbox,
        runs=svc.runs,
        skills=svc.ctx.skills,
        token=svc.token,
        schedules=scheduler.list_json if scheduler is not None else None,
    )


def install(app: FastAPI, settings: Settings) -> None:
    secure = settings.base_url.startswith("https://")
    app.include_router(web_router(_deps, secure_cookie=secure))
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="web-static")


async def start(svc: Services, app: FastAPI) -> None:
    return None
