"""The worker: claims runnable runs and steps them, many at a time.

A worker claims a run with a lease (on PostgreSQL `FOR UPDATE SKIP LOCKED`), so any number of
workers in any number of processes share one database. It sleeps until woken (a decision, a
new run) or until the poll interval passes, the safety net. A watcher cancels in-flight runs
when the kill switch goes on or a run is cancelled elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from typing import Any

from agent.context import Context
from agent.engine import Engine, cancel_in_flight
from agent.model import RunStatus
from agent.store import LeaseLost
from agent.tasks import stop_if_cancelled

log = logging.getLogger(__name__)


class Worker:
    def __init__(
        self,
        ctx: Context,
        engine: Engine,
        *,
        name: str | None = None,
        concurrency: int = 8,
        poll_interval: float = 2.0,
        watch_interval: float = 1.0,
    ) -> None:
        self.ctx = ctx
        self.engine = engine
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self) & 0xFFFF:x}"
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.watch_interval = watch_interval
        self._wake = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._stopping = False
        self._claims = 0

    def wake(self) -> None:
        self._wake.set()

    async def interrupt(self, run_id: str) -> None:
        """Cancel the in-flight step of `run_id` on this worker, if there is one."""
        task = self._tasks.get(run_id)
        if task is not None:
            await cancel_in_flight(task)

    async def run_forever(self) -> None:
        watcher = asyncio.create_task(self._watch(), name="worker-watch")
        try:
            while not self._stopping:
                stop_if_cancelled()
                # Clear before looking, not after: a wake-up that arrives while `fill` awaits
                # the database must not be lost (the run would wait a whole poll interval).
                self._wake.clear()
                claimed = await self.fill()
                if not claimed:
                    # `asyncio.timeout`: `wait_for` can swallow a cancel on Python 3.11.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.poll_interval):
                            await self._wake.wait()
        finally:
            watcher.cancel()
            await self.stop()

    async def fill(self) -> int:
        """Claim runs until the worker is full or the queue is empty; return how many."""
        claimed = 0
        while len(self._tasks) < self.concurrency:
            # Each claim has its own token, so an older step of the same run in this process is
            # fenced out too, not only steps of other workers.
            self._claims += 1
            claim = f"{self.name}#{self._claims}"
            try:
                run = await self.ctx.store.claim_run(
                    worker=claim, now=self.ctx.clock(), lease_seconds=self.engine.lease_seconds
                )
            except Exception:
                log.exception("claiming a run failed")
                break
            if run is None:
                break
            claimed += 1
            task = asyncio.create_task(self._advance(run, claim), name=f"run:{run.id}")
            self._tasks[run.id] = task
            # Let the claimed run take its first step before claiming the next: a decision's
            # run should not wait behind the claims of runs that came after it.
            await asyncio.sleep(0)
        return claimed

    async def _advance(self, run: Any, claim: str) -> None:
        # The step runs in this task (no task of its own: one loop turn less before a claimed
        # run starts); the heartbeat cancels this task if the lease is lost.
        this = asyncio.current_task()
        assert this is not None
        heartbeat = asyncio.create_task(self._heartbeat(run.id, claim, this))
        try:
            await self.engine.advance(run, worker=claim)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "run %s: unexpected error while stepping", run.id, extra={"run_id": run.id}
            )
        finally:
            heartbeat.cancel()
            if self._tasks.get(run.id) is this:
                self._tasks.pop(run.id, None)
            self._wake.set()

    async def _heartbeat(self, run_id: str, claim: str, step: asyncio.Task[Any]) -> None:
        """Keep the lease while a step is in flight (a model or tool call can outlast it);
        if the lease is lost anyway, stop the step: the run belongs to someone else now."""
        while not step.done():
            await asyncio.sleep(self.engine.lease_seconds / 3)
            try:
                await self.ctx.store.renew_lease(
                    run_id,
                    worker=claim,
                    now=self.ctx.clock(),
                    lease_seconds=self.engine.lease_seconds,
                )
            except LeaseLost:
                step.cancel()
                return
            except Exception:
                log.warning(
                    "run %s: renewing the lease failed",
                    run_id,
                    exc_info=True,
                    extra={"run_id": run_id},
                )

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.watch_interval)
            if not self._tasks:
                continue
            try:
                killed = await self.ctx.store.get_kill() is not None
                for run_id, task in list(self._tasks.items()):
                    status = (await self.ctx.store.get_run(run_id)).status
                    # Stop only what someone stopped; a run that ended or waits ends its own step.
                    if killed or status in {RunStatus.CANCELLED, RunStatus.KILLED}:
                        await cancel_in_flight(task)
            except Exception:
                log.exception("worker watch failed")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        tasks = list(self._tasks.values())
        for task in tasks:
            await cancel_in_flight(task)
