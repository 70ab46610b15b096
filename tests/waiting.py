"""The one way a test waits for something another task or process does: `eventually`.

A fixed sleep either waits too long or, on a busy machine, not long enough; a hand-written
loop per file grows its own deadline and its own silent failure. `eventually` asks a check
until it answers, with a deadline, and when the deadline passes it fails saying what was
awaited and what the check last saw, so a timed-out test reads as a sentence. The short pause
between two asks is polling, not synchronisation: the test goes on the moment the check
holds.

Where the code offers an event (`asyncio.Event`, a queue), await it inside
`asyncio.timeout` instead of polling. `eventually_sync` is the same wait for code that must
block, such as a peer's `start()` called by a sync fixture or in a worker thread.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

#: How long a test waits before it says what it was waiting for. Generous: CI machines are
#: slow and shared, and a passing test never waits it out.
DEADLINE = 30.0
INTERVAL = 0.05


class _NotYet:
    def __repr__(self) -> str:
        return "nothing (the check never answered)"


_NOT_YET = _NotYet()


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    what: str,
    timeout: float = ...,
    interval: float = ...,
    retry_on: tuple[type[Exception], ...] = ...,
    context: Callable[[], str] | None = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], T | None],
    *,
    what: str,
    timeout: float = ...,
    interval: float = ...,
    retry_on: tuple[type[Exception], ...] = ...,
    context: Callable[[], str] | None = ...,
) -> T: ...


async def eventually(
    check: Callable[[], object],
    *,
    what: str,
    timeout: float = DEADLINE,
    interval: float = INTERVAL,
    retry_on: tuple[type[Exception], ...] = (),
    context: Callable[[], str] | None = None,
) -> object:
    """Ask `check` (sync or async) until it returns something truthy, and return that.

    `what` names what is awaited ("run r1 to finish"); it opens the failure message, followed
    by the check's last answer and, when given, `context()` (a server's log, say). An
    exception of a type in `retry_on` counts as "not yet" (a server still starting refuses
    connections); any other exception fails the test at once.
    """
    deadline = time.monotonic() + timeout
    last: object = _NOT_YET
    while True:
        try:
            answer = check()
            if inspect.isawaitable(answer):
                answer = await answer
        except retry_on as exc:
            last = exc
        else:
            if answer:
                return answer
            last = answer
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(interval)
    raise _timed_out(what, timeout, last, context)


def eventually_sync(
    check: Callable[[], T | None],
    *,
    what: str,
    timeout: float = DEADLINE,
    interval: float = INTERVAL,
    retry_on: tuple[type[Exception], ...] = (),
    context: Callable[[], str] | None = None,
) -> T:
    """`eventually` for code that must block: a peer's `start()` run by a sync fixture or in a
    worker thread, where no event loop can be started (one may already run on this thread)."""
    deadline = time.monotonic() + timeout
    last: object = _NOT_YET
    while True:
        try:
            answer = check()
        except retry_on as exc:
            last = exc
        else:
            if answer:
                return answer
            last = answer
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise _timed_out(what, timeout, last, context)


def _timed_out(
    what: str, timeout: float, last: object, context: Callable[[], str] | None
) -> AssertionError:
    message = f"waited {timeout:g} s for {what}; last seen: {last!r}"
    if context is not None:
        message += f"\n{context()}"
    return AssertionError(message)
