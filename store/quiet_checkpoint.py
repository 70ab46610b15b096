"""Checkpoint SQLite's write-ahead log when the database is quiet, not inside a commit.

By default SQLite checkpoints the WAL (copies its pages into the database file, then syncs
both) in whichever commit makes the log pass 1,000 pages; that commit then takes several
milliseconds longer, and the person whose click it was waits for it. An inbox is written in
bursts (a run's steps, a decision) with quiet moments between them, so this checkpoints in
those moments instead: a fixed delay after the last write, under the same lock as our
own transactions, in the database's thread so the event loop never waits on the sync.

The automatic checkpoint stays as the backstop for long unbroken bursts, at a higher mark
(`WAL_AUTOCHECKPOINT_PAGES`): a commit that reaches it pays for a longer copy, but only
after some 40 MiB of writes with no quiet moment between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine, text

log = logging.getLogger(__name__)

#: Pages (4 KiB each) the WAL may reach before a commit checkpoints it itself.
WAL_AUTOCHECKPOINT_PAGES = 10_000

#: Seconds without a write before the log is checkpointed.
QUIET_SECONDS = 0.25


class QuietCheckpointer:
    """Runs `PRAGMA wal_checkpoint(PASSIVE)` once the database has been quiet for
    `quiet` seconds after a write. PASSIVE never waits for readers or writers of
    other processes: what they still use is left for the next checkpoint."""

    def __init__(
        self,
        engine: Engine,
        lock: asyncio.Lock,
        thread: ThreadPoolExecutor,
        *,
        quiet: float = QUIET_SECONDS,
    ) -> None:
        self._engine = engine
        self._lock = lock
        self._thread = thread
        self._quiet = quiet
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self.checkpoints = 0

    def wrote(self) -> None:
        """A transaction that wrote just ended: checkpoint once nothing has been written for
        a while. Reads do not count: they add nothing to the log, and a server polls."""
        loop = asyncio.get_running_loop()
        self._last = loop.time()
        if self._timer is None and self._task is None:
            self._timer = loop.call_at(self._last + self._quiet, self._due)

    def _due(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = None
        wait = self._last + self._quiet - loop.time()
        if wait > 0:
            # Written meanwhile: look again when it has been quiet long enough.
            self._timer = loop.call_later(wait, self._due)
            return
        self._task = loop.create_task(self._checkpoint(), name="sqlite-checkpoint")

    async def _checkpoint(self) -> None:
        try:
            async with self._lock:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self._thread, _checkpoint, self._engine)
            self.checkpoints += 1
        except Exception as exc:
            # The automatic checkpoint still runs; nothing is lost if this one does not.
            log.warning("SQLite checkpoint failed: %r", exc)
        finally:
            self._task = None

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = self._task
        if task is not None:
            with contextlib.suppress(Exception):
                await task


def _checkpoint(engine: Engine) -> None:
    with engine.connect() as c:
        c.execute(text("PRAGMA wal_checkpoint(PASSIVE)"))
