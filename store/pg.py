"""PostgreSQL as the coordinator of many processes: wake-ups and singleton leadership.

- `RunListener` LISTENs on the channel the store NOTIFYs (in the same transaction) whenever a
  run becomes runnable, so an idle worker in any process resumes a decided run at once; the
  worker's polling stays as the safety net.
- `Leadership` holds a session-level advisory lock on a connection of its own: exactly one
  process at a time runs a singleton (the outbox dispatcher, the scheduler, the IMAP loop,
  Slack's Socket Mode). When that process dies, its connection and lock go with it, and the
  next process that tries takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

RUNS_CHANNEL = "pizzabot_runs"


def dsn(engine: AsyncEngine) -> str:
    """A plain asyncpg DSN for the engine's database."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def lock_key(name: str) -> int:
    """A stable 63-bit advisory-lock key for a singleton's name."""
    return int.from_bytes(hashlib.sha256(f"pizzabot:{name}".encode()).digest()[:8], "big") >> 1


class RunListener:
    """LISTEN on the runs channel: `on_notify(run_id)` for every run another process made
    runnable or decided, and `on_notify(None)` on each (re)connect, for whatever was
    announced while nobody listened."""

    def __init__(
        self, engine: AsyncEngine, on_notify: Callable[[str | None], None], *, retry: float = 2.0
    ) -> None:
        self._dsn = dsn(engine)
        self._on_notify = on_notify
        self._retry = retry

    async def run_forever(self) -> None:
        import asyncpg

        while True:
            conn = None
            try:
                conn = await asyncpg.connect(self._dsn)
                await conn.add_listener(
                    RUNS_CHANNEL, lambda _c, _pid, _ch, run_id: self._on_notify(run_id)
                )
                # A wake-up now covers anything queued while we were not listening.
                self._on_notify(None)
                while not conn.is_closed():
                    await asyncio.sleep(self._retry)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("LISTEN %s lost: %s; retrying", RUNS_CHANNEL, exc)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
            await asyncio.sleep(self._retry)


class Leadership:
    """Run `work()` only while this process holds the advisory lock named `name`."""

    def __init__(
        self,
        engine: AsyncEngine,
        name: str,
        work: Callable[[], Coroutine[Any, Any, Any]],
        *,
        retry: float = 2.0,
    ) -> None:
        self._dsn = dsn(engine)
        self.name = name
        self._work = work
        self._retry = retry
        self.leading = False

    async def run_forever(self) -> None:
        import asyncpg

        key = lock_key(self.name)
        while True:
            conn = None
            task: asyncio.Task[Any] | None = None
            try:
                conn = await asyncpg.connect(self._dsn)
                while not await conn.fetchval("SELECT pg_try_advisory_lock($1)", key):
                    await asyncio.sleep(self._retry)
                self.leading = True
                log.info("leading %s", self.name)
                task = asyncio.create_task(self._work(), name=f"singleton:{self.name}")
                # Keep checking the connection: if it drops, the lock is gone and so must we be.
                while not task.done():
                    await asyncio.sleep(self._retry)
                    await conn.fetchval("SELECT 1")
                await task
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("singleton %s stopped: %s; trying again", self.name, exc)
            finally:
                self.leading = False
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
            await asyncio.sleep(self._retry)
