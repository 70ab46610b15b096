"""What the chat platforms' routes and start-up share: a request's body read as one JSON
object (else the answer saying why), and a registration with a platform retried until the
platform takes it (it may be down while the server starts; the server starts all the same).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi.responses import JSONResponse
from starlette.requests import Request

__all__ = ["Spawn", "not_connected", "read_object", "until_taken"]

#: Runs work (named) in one process of all that share the database, as long as the server.
Spawn = Callable[[str, Callable[[], Coroutine[Any, Any, Any]]], object]


async def read_object(request: Request, what: str) -> dict[str, Any] | JSONResponse:
    """The body as a JSON object, or the 400 answer saying it is not `what`."""
    try:
        body: Any = json.loads(await request.body())
    except ValueError:
        return JSONResponse({"detail": "the body is not JSON"}, status_code=400)
    if not isinstance(body, dict):
        return JSONResponse({"detail": f"{what} is a JSON object"}, status_code=400)
    return body


def not_connected(platform: str) -> JSONResponse:
    """The answer while the services that answer `platform` are not running (yet)."""
    return JSONResponse({"detail": f"{platform} is not connected"}, status_code=503)


async def until_taken(
    call: Callable[[], Awaitable[object]],
    *,
    what: str,
    refused: type[Exception],
    log: logging.Logger,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    longest: float = 300.0,
) -> None:
    """Make `call` until it does not raise `refused`, waiting twice as long each time."""
    wait = 1.0
    while True:
        try:
            await call()
            return
        except refused as exc:
            log.warning("%s failed (%s); again in %.0f s", what, exc, wait)
            await sleep(wait)
            wait = min(wait * 2, longest)
