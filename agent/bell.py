"""`Bell`: wake whoever waits for a decision on a run, in this process, at once.

A request's long-poll and a run's tool waiting on a person's answer (an MCP elicitation)
both wait for an item of one run to be decided. The decision rings the bell for that run
where it is recorded and, with PostgreSQL, where another process's decision is announced
(the runs channel's NOTIFY names the run); only that run's waiters look again, once, so a
decision costs the same with ten thousand requests waiting as with one. What concerns every
waiter (the kill switch, a listener that reconnected and may have missed announcements)
rings for all. Nothing polls the database on a timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["Bell"]


class Bell:
    def __init__(self) -> None:
        #: What waiters on no run in particular wait on: every ring wakes them.
        self._any = asyncio.Event()
        #: One event per run someone waits on, with how many wait on it.
        self._runs: dict[str, asyncio.Event] = {}
        self._waiting: dict[str, int] = {}
        self.rings = 0

    def ring(self, run_id: str | None = None) -> None:
        """Wake the waiters on `run_id` (None: every waiter); later waiters wait for the
        next ring."""
        self.rings += 1
        event, self._any = self._any, asyncio.Event()
        event.set()
        if run_id is None:
            runs, self._runs = self._runs, {}
            for each in runs.values():
                each.set()
            return
        own = self._runs.pop(run_id, None)
        if own is not None:
            own.set()

    async def until(
        self,
        look: Callable[[], Awaitable[T | None]],
        timeout: float,
        *,
        run_id: str | None = None,
    ) -> T | None:
        """Call `look` now and after every ring for `run_id` (None: after every ring) until
        it returns something (that is returned) or `timeout` seconds pass (None)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        if run_id is not None:
            self._waiting[run_id] = self._waiting.get(run_id, 0) + 1
        try:
            while True:
                # Taken before looking: a ring while `look` runs is not missed.
                event = self._event(run_id)
                found = await look()
                if found is not None:
                    return found
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                try:
                    async with asyncio.timeout(remaining):
                        await event.wait()
                except TimeoutError:
                    return await look()
        finally:
            if run_id is not None:
                self._left(run_id)

    def _event(self, run_id: str | None) -> asyncio.Event:
        if run_id is None:
            return self._any
        event = self._runs.get(run_id)
        if event is None:
            event = self._runs[run_id] = asyncio.Event()
        return event

    def _left(self, run_id: str) -> None:
        """One waiter on `run_id` is gone; the last takes the run's event with it."""
        left = self._waiting[run_id] - 1
        if left:
            self._waiting[run_id] = left
            return
        del self._waiting[run_id]
        self._runs.pop(run_id, None)
