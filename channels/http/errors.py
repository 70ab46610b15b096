"""The engine's errors as HTTP answers, one place for every route: 404 not found, 403 not
allowed, 409 a conflict (decided already, with who and when; the card changed, with the item
as it is now; the kill switch), 422 invalid input by field; and a 405 that names every method
the path takes.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.errors import (
    AlreadyDecided,
    CardChanged,
    Conflict,
    InvalidArguments,
    NotAllowed,
    NotFound,
)

__all__ = ["allowed_methods", "install_error_handlers"]


def allowed_methods(app: FastAPI, scope: Any) -> list[str]:
    """Every method some route of this path takes (Starlette's 405 names only one route's)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, Route) and route.methods and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405:
            allow = ", ".join(allowed_methods(app, request.scope))
            exc = StarletteHTTPException(405, exc.detail, {**(exc.headers or {}), "Allow": allow})
        return await http_exception_handler(request, exc)

    @app.exception_handler(NotFound)
    async def _nf(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 404)

    @app.exception_handler(AlreadyDecided)
    async def _ad(_: Request, exc: AlreadyDecided) -> JSONResponse:
        it = exc.item
        return JSONResponse(
            {
                "detail": {
                    "message": str(exc),
                    "status": str(it.status),
                    "decided_by": it.decided_by,
                    "decided_via": it.decided_via,
                    "decided_at": it.decided_at.isoformat() if it.decided_at else None,
                }
            },
            409,
        )

    @app.exception_handler(CardChanged)
    async def _cc(_: Request, exc: CardChanged) -> JSONResponse:
        return JSONResponse(
            {
                "detail": {
                    "message": str(exc),
                    "version": exc.item.version,
                    "digest": card_digest(exc.item),
                    "args": exc.item.args,
                }
            },
            409,
        )

    @app.exception_handler(Conflict)
    async def _cf(_: Request, exc: Conflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 409)

    @app.exception_handler(InvalidArguments)
    async def _ia(_: Request, exc: InvalidArguments) -> JSONResponse:
        return JSONResponse({"detail": {"message": str(exc), "errors": exc.errors}}, 422)

    @app.exception_handler(NotAllowed)
    async def _na(_: Request, exc: NotAllowed) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 403)
