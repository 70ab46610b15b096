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
from store.web_sessions import SqlSessionEnds


def _deps(request: Request) -> WebDeps:
    svc: Services = request.app.state.services
    scheduler = svc.extras.get("scheduler")
    return WebDeps(
        store=svc.store,
        inbox=svc.inbox,
        runs=svc.runs,
        skills=svc.ctx.skills,
        token=svc.token,
        ended=SqlSessionEnds(svc.store),
        schedules=scheduler.list_json if scheduler is not None else None,
    )


def install(app: FastAPI, settings: Settings) -> None:
    secure = settings.base_url.startswith("https://")
    app.include_router(
        web_router(
            _deps,
            secure_cookie=secure,
            login_max_failures=settings.web_login_max_failures,
            login_window=settings.web_login_window,
        )
    )
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="web-static")


async def start(svc: Services, app: FastAPI) -> None:
    return None
