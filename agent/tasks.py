"""A guard for the service loops (worker, outbox, timers, receivers) against a lost cancel.

On Python 3.11 `asyncio.wait_for` returns the inner result when a cancel arrives just as the
inner awaitable finishes, and the cancel is lost (fixed in 3.12). Libraries under our loops
use it (aiosmtplib to connect, for one), so a shutdown could wait forever on a loop that never
saw its cancel. Each loop calls `stop_if_cancelled()` on every turn: the task still counts
the request (`Task.cancelling()`), so the loop stops at its next turn.
"""

from __future__ import annotations

import asyncio


def stop_if_cancelled() -> None:
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
