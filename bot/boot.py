"""Answer at once, then become the real app: the first thing `pizzabot serve` listens with.

Building the app imports SQLAlchemy, FastAPI, the channels and the engine, which takes a
second or two on a small machine — longer than a supervisor should wait to hear that the
process is alive. So uvicorn starts with this small ASGI app: `/healthz` answers at once
(`"ready": false` while starting), `/readyz` answers 503 until the app is built and started,
and every other request gets 503 with Retry-After. Once the real app has run its startup, every
request goes straight to it, and `on_ready` is told (`pizzabot serve` says so in one line).

`build` imports on a thread, so `/healthz` keeps answering; what it starts beside the app (the
skills' MCP servers) it closes through the exit stack it is given, which closes at shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AsyncExitStack, suppress
from typing import Any

log = logging.getLogger("pizzabot")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BootApp:
    def __init__(
        self,
        build: Callable[[AsyncExitStack], Awaitable[Any]],
        *,
        on_failure: Callable[[], None],
        on_ready: Callable[[Any], None] | None = None,
    ) -> None:
        self._build = build
        self._on_failure = on_failure
        self._on_ready = on_ready
        self._app: ASGIApp | None = None
        self._stack = AsyncExitStack()
        self._task: asyncio.Task[None] | None = None
        self.failed: BaseException | None = None

    @property
    def ready(self) -> bool:
        return self._app is not None

    @property
    def built(self) -> Any:
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif self._app is not None:
            await self._app(scope, receive, send)
        elif scope["type"] == "http":
            await self._starting(scope, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1013})  # try again later

    async def _starting(self, scope: Scope, send: Send) -> None:
        body: dict[str, Any]
        if scope["path"] == "/healthz":
            status, body = 200, {"ok": True, "ready": False}
        else:
            status, body = 503, {"detail": "Pizza Bot is starting; try again in a moment"}
        payload = json.dumps(body).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ]
        if status == 503:
            headers.append((b"retry-after", b"1"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        self._task = asyncio.create_task(self._start(), name="boot")
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        if not self._task.done():
            self._task.cancel()
        with suppress(BaseException):  # a failed or cancelled start was logged already
            await self._task
        await self._stack.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    async def _start(self) -> None:
        try:
            app = await self._build(self._stack)
            await self._stack.enter_async_context(app.router.lifespan_context(app))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.failed = exc
            log.critical("Pizza Bot could not start: %s", exc, exc_info=exc)
            self._on_failure()  # the server shuts down and `serve` exits non-zero
            return
        self._app = app
        if self._on_ready is not None:
            try:
                self._on_ready(app)
            except Exception:  # saying so must not stop a server that runs
                log.exception("after the start")
