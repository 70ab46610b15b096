"""What the local peers of Teams, Discord and Telegram share: an aiohttp server on loopback,
on a thread and event loop of its own (so it keeps answering while the test's loop waits on a
server process), that records every call, can be told to fail the next ones (a 429 with its
wait, a 500), and checks each payload against its platform's documented limits.

A platform's peer subclasses `Recorder`: `routes` adds its handlers, which call `record` and
answer with what the platform would; `problems(call)` says what that platform would refuse.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, TypeVar

from aiohttp import web

from tests.waiting import eventually

T = TypeVar("T")


@dataclass
class Call:
    """One request the peer answered: its method (or route), its JSON body, the credential it
    came with, the status answered and the answer's body."""

    method: str
    args: dict[str, Any]
    auth: str | None
    status: int
    answer: Any = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class Failure:
    status: int
    retry_after: float | None
    methods: frozenset[str] | None


class Recorder:
    """Use as `async with Peer() as peer:`; `peer.base` is its root URL."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.port = 0
        self.lock = threading.Lock()
        self._failures: list[Failure] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def problems(self, call: Call) -> list[str]:
        """What the platform would refuse in `call` (empty: nothing)."""
        return []

    async def there(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the peer's loop and wait for it from the caller's."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def __aenter__(self) -> Self:
        self._thread.start()
        await self.there(self._start())
        return self

    async def _start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._thread.is_alive():
            return
        if self._runner is not None:
            await self.there(self._runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self.loop.close()

    # -- failing on purpose --------------------------------------------------------------

    def fail_next(
        self,
        n: int,
        *,
        status: int = 500,
        retry_after: float | None = None,
        methods: set[str] | None = None,
    ) -> None:
        with self.lock:
            only = frozenset(methods) if methods else None
            self._failures += [Failure(status, retry_after, only) for _ in range(n)]

    def failure_for(self, method: str) -> Failure | None:
        with self.lock:
            for i, failure in enumerate(self._failures):
                if failure.methods is None or method in failure.methods:
                    return self._failures.pop(i)
        return None

    # -- what was called -----------------------------------------------------------------

    def record(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def calls_to(self, method: str) -> list[Call]:
        with self.lock:
            calls = list(self.calls)
        return [c for c in calls if c.method == method and c.status < 300]

    def check(self) -> None:
        """Fail with every payload so far that the platform would refuse."""
        with self.lock:
            calls = list(self.calls)
        found = [f"{c.method}: {p}" for c in calls for p in self.problems(c)]
        assert not found, "the platform would refuse:\n" + "\n".join(found)

    async def wait_for(
        self,
        method: str,
        predicate: Callable[[Call], bool] = lambda c: True,
        *,
        count: int = 1,
        timeout: float = 20.0,
    ) -> list[Call]:
        """The successful calls of `method` matching `predicate`, once there are `count`."""

        def found() -> list[Call] | None:
            calls = [c for c in self.calls_to(method) if predicate(c)]
            return calls if len(calls) >= count else None

        return await eventually(
            found,
            what=f"{count} x {method}",
            timeout=timeout,
            interval=0.02,
            context=lambda: f"calls: {[(c.method, c.status) for c in self.calls][-30:]}",
        )
