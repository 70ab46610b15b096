"""How a worker claims: in one transaction for all its free slots, at once when woken, and
not again until there may be something to take.

The poll interval is set to a minute here, so a run that waited for the poll (a wake-up the
worker missed) would time the test out instead of passing slowly.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pizzabot.agent.model import Approve, Box, Item, ItemStatus, RunStatus
from pizzabot.agent.policy import Principal
from pizzabot.agent.runs import Runs
from pizzabot.agent.testing.scripts import Reply, turns
from tests.peers.grant_stories import calls, calls_from_input, sent
from tests.peers.inproc import InProcess
from tests.peers.mcp_tools import read_log
from tests.waiting import eventually


async def _quiet(h: InProcess, *, concurrency: int) -> list[int]:
    """Give the worker a one-minute poll and `concurrency` slots; count its claims from now
    on (how many runs each claim asked for)."""
    asked: list[int] = []
    polled = asyncio.Event()
    claim_runs = h.store.claim_runs

    async def counting(**kw: Any) -> Any:
        asked.append(kw["limit"])
        try:
            return await claim_runs(**kw)
        finally:
            # Set here, not before: a claim already under way would otherwise be followed by
            # a one-minute wait that nothing here ends.
            h.worker.poll_interval = 60
            polled.set()

    h.store.claim_runs = counting  # type: ignore[method-assign]
    h.worker.concurrency = concurrency
    # The worker's next poll (due within its 0.05 s) goes through `counting`; its wait after
    # that, which it is in once this task runs again, is the one-minute one.
    async with asyncio.timeout(10):
        await polled.wait()
    asked.clear()
    return asked


async def test_a_full_worker_takes_the_next_queued_run_when_one_finishes(tmp_path: Path) -> None:
    async with InProcess(tmp_path, turns(Reply(text="done"))) as h:
        asked = await _quiet(h, concurrency=1)
        runs = [await h.runs.start("test", f"job {i}", by=Principal.owner("api")) for i in range(4)]
        for run in runs:
            assert (await h.wait(run.id, {"done"}, timeout=30)).status is RunStatus.DONE
        # One slot: each claim asked for one run; the queued ones were taken as slots freed.
        assert asked and set(asked) == {1}


async def test_an_idle_worker_claims_once_per_run_queued_elsewhere(tmp_path: Path) -> None:
    async with InProcess(tmp_path, turns(Reply(text="done"))) as h:
        asked = await _quiet(h, concurrency=8)
        # Started as a process without a worker starts it (the CLI, a web-only server): its
        # store hands the run to no one, so it queues; word of it wakes this worker, as the
        # listener for other processes' runs does.
        h.store.hand_over_to(None)
        run = await Runs(h.ctx).start("test", "one job", by=Principal.owner("api"))
        assert run.status is RunStatus.QUEUED
        h.store.hand_over_to(h.worker)
        h.worker.wake()
        await h.wait(run.id, {"done"}, timeout=30)
        await eventually(lambda: not h.worker._tasks, what="the run's step to end")
        # One claim for all eight free slots; it came back short, so the queue was empty and
        # the run's end did not send the worker looking again: no wake-up is pending, and a
        # consumed one would have claimed at once (the loop claims as it clears the wake-up).
        assert not h.worker._wake.is_set()
        assert asked == [8]


async def test_a_run_started_here_runs_without_a_claim(tmp_path: Path) -> None:
    async with InProcess(tmp_path, turns(Reply(text="done"))) as h:
        asked = await _quiet(h, concurrency=8)
        run = await h.runs.start("test", "one job", by=Principal.owner("api"))
        # The creating transaction took the run for this worker: it runs already.
        assert run.status is RunStatus.RUNNING
        assert run.lease_owner is not None and run.lease_owner.startswith(h.worker.name)
        assert (await h.wait(run.id, {"done"}, timeout=30)).status is RunStatus.DONE
        assert asked == []


async def test_a_decision_made_here_starts_its_run_without_a_claim(tmp_path: Path) -> None:
    async with InProcess(tmp_path, calls_from_input) as h:
        run = await h.runs.start("test", calls(("a@x.example", "one")), by=Principal.owner("api"))

        async def card() -> Item | None:
            items = await h.store.list_items(
                box=Box.ACTION, status=ItemStatus.PENDING, run_id=run.id
            )
            return items[0] if items else None

        item = await eventually(card, what="the run's card")
        asked = await _quiet(h, concurrency=8)
        await h.inbox.decide(item.id, Approve(), by=Principal.owner("web"))
        # The decision's transaction took the run for this worker: it runs already.
        now = await h.store.get_run(run.id)
        assert now.status is RunStatus.RUNNING
        assert now.lease_owner is not None and now.lease_owner.startswith(h.worker.name)
        assert (await h.wait(run.id, {"done"}, timeout=30)).status is RunStatus.DONE
        assert sent(read_log(h.tools_log)) == ["one"]
        assert asked == []
