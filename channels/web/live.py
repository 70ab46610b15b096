"""The page's long-poll: a live region asks for its fragment with the fingerprint of what it
shows and a wait, and is answered at once when what it would show now differs; else the
request is held until the inbox changes or the wait ends (then 204).

`Changes` is what held requests sleep on. The engine rings it: it is one of the outbox's
listeners (a new item, a decision, a card's update and a run's end all ring the outbox), and
with PostgreSQL the runs channel's announcement of another process's decision rings it too.
A ring makes each held request render its fragment once more, for its own session; only
those whose fingerprint moved answer. Nothing polls the database on a timer.

What it costs is bounded: at most `Changes.per_session` requests held for one session and
`Changes.total` for the process (429 beyond either), each for at most `Changes.max_wait`
seconds; a request whose browser went away (a closed tab, a reload) is let go at once, and
every held request is answered when the server is told to stop (`Changes.close`), so a stop
never waits a wait out.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from pizzabot.agent.bell import Bell

__all__ = ["VERSION_HEADER", "Changes", "fingerprint", "held_fragment"]

T = TypeVar("T")

#: The response header that carries the fingerprint of the fragment it answers with.
VERSION_HEADER = "X-Live-Version"


class Changes:
    """The web's waiters on "something in the inbox changed", and how many are held."""

    def __init__(self, *, per_session: int = 4, total: int = 200, max_wait: float = 30.0) -> None:
        self.per_session = per_session
        self.total = total
        self.max_wait = max_wait
        self._bell = Bell()
        self._by_session: dict[str, int] = {}
        #: The server is stopping: nothing more is held, so it need not wait for anything.
        self.closed = False

    def ring(self) -> None:
        """Wake every held request to look again."""
        self._bell.ring()

    def close(self) -> None:
        """Answer every held request now (204) and hold no more: the server is stopping."""
        self.closed = True
        self._bell.ring()

    @property
    def held(self) -> int:
        """How many requests are held now."""
        return sum(self._by_session.values())

    def take(self, sid: str) -> bool:
        """Count one more request held for `sid`; False (nothing counted) over a cap."""
        if self.closed:
            return False
        if self._by_session.get(sid, 0) >= self.per_session or self.held >= self.total:
            return False
        self._by_session[sid] = self._by_session.get(sid, 0) + 1
        return True

    def give_back(self, sid: str) -> None:
        left = self._by_session.get(sid, 0) - 1
        if left > 0:
            self._by_session[sid] = left
        else:
            self._by_session.pop(sid, None)

    async def until(self, look: Callable[[], Awaitable[T | None]], wait: float) -> T | None:
        """`look` now and after every ring, until it finds something or `wait` (at most
        `max_wait`) seconds pass, or the server stops (None)."""

        async def unless_closed() -> T | bool | None:
            return False if self.closed else await look()

        found = await self._bell.until(unless_closed, min(wait, self.max_wait))
        return None if found is False else cast("T | None", found)


def fingerprint(html: str) -> str:
    """A short name for what a fragment shows: equal fragments, equal fingerprints."""
    return hashlib.sha256(html.encode()).hexdigest()[:16]


async def held_fragment(
    request: Request,
    sid: str,
    changes: Changes | None,
    render: Callable[[], Awaitable[str]],
    headers: dict[str, str],
) -> Response:
    """The fragment `render` makes, answered as the long-poll's query asks (`seen`: the
    fingerprint the page shows; `wait`: seconds it may be held). Without `changes` it is
    answered at once, as a plain poll."""
    seen = request.query_params.get("seen", "")[:32]
    wait = _seconds(request.query_params.get("wait"))
    html = await render()
    if changes is None or changes.closed or wait <= 0 or fingerprint(html) != seen:
        return _answer(html, headers)
    if not changes.take(sid):
        return Response(status_code=429, headers={**headers, "Retry-After": "5"})
    try:

        async def look() -> str | None:
            fresh = await render()
            return fresh if fingerprint(fresh) != seen else None

        found = await _unless_gone(request, changes.until(look, wait))
    finally:
        changes.give_back(sid)
    if found is None:
        return Response(status_code=204, headers={**headers, VERSION_HEADER: seen})
    return _answer(found, headers)


def _answer(html: str, headers: dict[str, str]) -> HTMLResponse:
    return HTMLResponse(html, 200, headers={**headers, VERSION_HEADER: fingerprint(html)})


def _seconds(value: str | None) -> float:
    try:
        seconds = float(value or 0)
    except ValueError:
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


async def _unless_gone(request: Request, waiting: Awaitable[str | None]) -> str | None:
    """What `waiting` finds; None at once when the browser closes the connection (nobody
    would read the answer, and the slot is free for its next ask)."""
    found = asyncio.ensure_future(waiting)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({found, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (found, gone):
            task.cancel()
        await asyncio.gather(found, gone, return_exceptions=True)
    return found.result() if found.done() and not found.cancelled() else None


async def _disconnected(request: Request) -> None:
    """Return when the client has gone: a GET's body is empty, so what comes next is the
    disconnect."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
