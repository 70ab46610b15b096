"""The web inbox put together: its routes in one router, and `install` to plug it into an app.

Every page works without JavaScript (forms post, then redirect to a page that shows the
outcome); ``static/live.js`` only refreshes a few regions, long-polling their HTML fragments
(`pizzabot.channels.web.live`).
Routes translate HTTP to `Inbox`/`Runs` calls and back, nothing more; who may ask is settled
by the dependencies in `pizzabot.channels.web.deps`.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles

from pizzabot.channels.web import (
    routes_away,
    routes_batch,
    routes_grants,
    routes_items,
    routes_login,
    routes_logs,
    routes_mail_login,
    routes_passkeys,
    routes_phone,
    routes_runs,
)
from pizzabot.channels.web._render import STATIC
from pizzabot.channels.web.deps import Answered, WebSite

__all__ = ["PARTS", "install", "web_router"]

#: The web inbox's routers, one per group of pages.
PARTS = (
    routes_login.router,
    routes_mail_login.router,
    routes_items.router,
    routes_runs.router,
    routes_logs.router,
    routes_grants.router,
    routes_away.router,
    routes_batch.router,
    routes_phone.router,
    routes_passkeys.router,
)

#: Every route of the web inbox, to include at ``/``. HTML pages, so not in the API's schema.
web_router = APIRouter(include_in_schema=False)
for _part in PARTS:
    web_router.include_router(_part)


def install(app: FastAPI, site: WebSite) -> None:
    """Serve the web inbox from ``app``: its routes at ``/``, its files at ``/static``."""
    app.state.web_site = site
    app.add_exception_handler(Answered, _answered)
    app.include_router(web_router)
    app.mount("/static", StaticFiles(directory=STATIC), name="web-static")


async def _answered(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Answered)
    return exc.response
