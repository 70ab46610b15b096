"""How a worker claims: in one transaction for all its free slots, at once when woken, and
not again until there may be something to take.

The poll interval is set to a minute here, so a run that waited for the poll (a wake-up the
worker missed) would time the test out instead of passing slowly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent.model import RunStatus
from agent.testing.scripts import Reply, turns
from tests.peers.inproc import InProcess


async def _quiet(h: InProcess, *, concurrency: int) -> list[int]:
    """Give the worker a one-minute poll and `concurrency` slots; count its claims from now
    on (how many runs each claim asked for)."""
    h.worker.concurrency = concurrency
    h.worker.poll_interval = 60
    await asyncio.sleep(0.2)  # the wait begun with the old 0.05 s poll has ended
    asked: list[int] = []
    claim_runs = h.store.claim_runs

    async def counting(**kw: Any) -> Any:
        asked.append(kw["limit"])
        return await claim_runs(**kw)

    h.store.claim_runs = counting  # type: ignore[method-assign]
    return asked


async def test_a_full_worker_takes_the_next_queued_run_when_one_finishes(tmp_path: Path) -> None:
    async with InProcess(tmp_path, turns(Reply(text="done"))) as h:
        asked = await _quiet(h, concurrency=1)
        runs = [await h.runs.start("test", f"job {i}") for i in range(4)]
        for run in runs:
            assert (await h.wait(run.id, {"done"}, timeout=30)).status is RunStatus.DONE
        # One slot: each claim asked for one run; the queued ones were taken as slots freed.
        assert asked and set(asked) == {1}


async def test_an_idle_worker_claims_once_per_new_run(tmp_path: Path) -> None:
    async with InProcess(tmp_path, turns(Reply(text="done"))) as h:
        asked = await _quiet(h, concurrency=8)
        run = await h.runs.start("test", "one job")
        await h.wait(run.id, {"done"}, timeout=30)
        await asyncio.sleep(0.3)  # time for any claim the run's end would set off
        # One claim for all eight free slots; it came back short, so the queue was empty and
        # the run's end did not send the worker looking again.
        assert asked == [8]
