"""The worker: claims runnable runs and steps them, many at a time.

A worker claims a run with a lease (on PostgreSQL `FOR UPDATE SKIP LOCKED`), so any number of
workers in any number of processes share one database. It sleeps until woken (a decision, a
new run) or until the poll interval passes, the safety net. A watcher cancels in-flight runs
when the kill switch goes on or a run is cancelled elsewhere.

A run started or decided in this process is handed straight over (`offer`, then `start`):
the transaction that creates it, or records its decision, claims it for the worker, and its
step starts at once, without a wake-up, a pass and a claim of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from typing import Any

from pizzabot.agent.context import Context
from pizzabot.agent.engine import Runner, cancel_in_flight
from pizzabot.agent.handover import ClaimedRun, Take
from pizzabot.agent.model import RunStatus
from pizzabot.agent.store import LeaseLost
from pizzabot.agent.tasks import stop_if_cancelled

log = logging.getLogger(__name__)


class Worker:
    def __init__(
        self,
        ctx: Context,
        engine: Runner,
        *,
        name: str | None = None,
        concurrency: int = 8,
        poll_interval: float = 2.0,
        watch_interval: float = 1.0,
        wake: asyncio.Event | None = None,
    ) -> None:
        self.ctx = ctx
        self.engine = engine
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self) & 0xFFFF:x}"
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.watch_interval = watch_interval
        #: What it sleeps on between passes; given when `ctx.wake_workers` rings it.
        self._wake = wake or asyncio.Event()
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._stopping = False
        self._running = False
        self._claims = 0
        # The last claim filled every slot, so claimable runs may be left in the queue.
        self._backlog = False

    def wake(self) -> None:
        self._wake.set()

    def offer(self) -> Take | None:
        """A lease for a run to be claimed with as it becomes runnable, when this worker runs
        and has a free slot and no queue to work off first (None: the run is queued, and
        any worker claims it)."""
        if self._backlog or not self._running or self._stopping:
            return None
        if len(self._tasks) >= self.concurrency:
            return None
        return Take(lease=self._next_lease(), lease_seconds=self.engine.lease_seconds)

    def start(self, take: Take) -> None:
        """Step the run `take` claimed (its creation's or its decision's transaction did)."""
        claimed = take.claimed
        assert claimed is not None
        run_id = claimed.run.id
        self._tasks[run_id] = asyncio.create_task(
            self._advance(claimed, take.lease), name=f"run:{run_id}"
        )

    def _next_lease(self) -> str:
        # Each claim has its own lease token, so an older step of the same run in this process
        # is fenced out too, not only steps of other workers.
        self._claims += 1
        return f"{self.name}#{self._claims}"

    async def interrupt(self, run_id: str) -> None:
        """Cancel the in-flight step of `run_id` on this worker, if there is one."""
        task = self._tasks.get(run_id)
        if task is not None:
            await cancel_in_flight(task)

    async def run_forever(self) -> None:
        watcher = asyncio.create_task(self._watch(), name="worker-watch")
        self._running = True
        try:
            while not self._stopping:
                stop_if_cancelled()
                # Clear before looking, not after: a wake-up that arrives while `fill` awaits
                # the database must not be lost (the run would wait a whole poll interval).
                self._wake.clear()
                await self.fill()
                # Until a new run, a decision or (when full) a finished run wakes it.
                # `asyncio.timeout`: `wait_for` can swallow a cancel on Python 3.11.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_interval):
                        await self._wake.wait()
        finally:
            self._running = False
            watcher.cancel()
            await self.stop()

    async def fill(self) -> int:
        """Claim runs until the worker is full or the queue is empty; return how many."""
        free = self.concurrency - len(self._tasks)
        if free <= 0:
            self._backlog = True
            return 0
        lease = self._next_lease()
        try:
            claimed = await self.ctx.store.claim_runs(
                lease=lease,
                now=self.ctx.clock(),
                lease_seconds=self.engine.lease_seconds,
                limit=free,
            )
        except Exception:
            log.exception("claiming runs failed")
            self._backlog = True
            return 0
        # One claim for all the free slots: fewer runs than asked for means the queue is
        # empty now, and new work will come with a wake-up; none is looked for meanwhile.
        self._backlog = len(claimed) == free
        for c in claimed:
            self._tasks[c.run.id] = asyncio.create_task(
                self._advance(c, lease), name=f"run:{c.run.id}"
            )
        return len(claimed)

    async def _advance(self, claimed: ClaimedRun, lease: str) -> None:
        # The step runs in this task (no task of its own: one loop turn less before a claimed
        # run starts); the heartbeat cancels this task if the lease is lost.
        run = claimed.run
        this = asyncio.current_task()
        assert this is not None
        heartbeat = asyncio.create_task(self._heartbeat(run.id, lease, this))
        try:
            await self.engine.advance(run, lease=lease, events=claimed.events)
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
            if self._backlog:
                # Runs may have been left queued while this worker was full.
                self._wake.set()

    async def _heartbeat(self, run_id: str, lease: str, step: asyncio.Task[Any]) -> None:
        """Keep the lease while a step is in flight (a model or tool call can outlast it);
        if the lease is lost anyway, stop the step: the run belongs to someone else now."""
        while not step.done():
            await asyncio.sleep(self.engine.lease_seconds / 3)
            try:
                await self.ctx.store.renew_lease(
                    run_id,
                    lease=lease,
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
