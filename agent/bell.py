"""`Bell`: wake everyone waiting for a decision, in this process, at once.

A request's long-poll and a run's tool waiting on a person's answer (an MCP elicitation)
both wait for an item to be decided. The decision rings the bell where it is recorded (the
context's `wake_workers`, which every decision and expiry calls) and, with PostgreSQL, where
another process's decision is announced (the runs channel's NOTIFY); every waiter then looks
again once. Nothing polls the database on a timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["Bell"]


class Bell:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.rings = 0

    def ring(self) -> None:
        """Wake every current waiter; later waiters wait for the next ring."""
        self.rings += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def until(self, look: Callable[[], Awaitable[T | None]], timeout: float) -> T | None:
        """Call `look` now and after every ring until it returns something (that is
        returned) or `timeout` seconds pass (None)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            # Taken before looking: a ring while `look` runs is not missed.
            event = self._event
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
