"""The memory store's run store: runs, their leases and their event logs (`RunStore`).

As in SQL, a claim takes the oldest claimable runs (queued, or running under a lease that
expired) and none while the kill switch is on; every write that belongs to a run's owner
checks its lease first (fencing); a run's end is one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from pizzabot.agent.events import Event, NewEvent
from pizzabot.agent.handover import ClaimedRun
from pizzabot.agent.model import Item, ItemStatus, Run, RunStatus, Target, Usage, transition
from pizzabot.agent.store import LeaseLost
from pizzabot.agent.testing._memory_state import MemoryBase, MemoryState, fresh


def _claimable(run: Run, now: datetime) -> bool:
    if run.status is RunStatus.QUEUED:
        return True
    expires = run.lease_expires_at
    return run.status is RunStatus.RUNNING and expires is not None and expires < now


def take_run(state: MemoryState, run: Run, lease: str, now: datetime, seconds: float) -> Run:
    """`run`, running under `lease` from `now` (started now unless it had started before)."""
    taken = replace(
        run,
        status=RunStatus.RUNNING,
        lease_owner=lease,
        lease_expires_at=now + timedelta(seconds=seconds),
        updated_at=now,
        started_at=run.started_at or now,
    )
    state.runs[run.id] = taken
    return taken


class MemoryRuns(MemoryBase):
    async def create_run(
        self,
        *,
        run_id: str,
        skill: str,
        input: str,
        trigger: str,
        now: datetime,
        events: Sequence[NewEvent] = (),
        idempotency_key: str | None = None,
    ) -> Run:
        take = self._offer()
        with self.transaction() as s:
            if idempotency_key is not None and idempotency_key in s.run_keys:
                return fresh(s.runs[s.run_keys[idempotency_key]])
            run = Run(
                id=run_id,
                skill=skill,
                status=RunStatus.QUEUED,
                input=input,
                trigger=trigger,
                created_at=now,
                updated_at=now,
            )
            s.add_run(run)
            if idempotency_key is not None:
                s.run_keys[idempotency_key] = run_id
            # Taken at once unless the kill switch is on: then it queues, as any new run.
            if take is not None and s.kill is None:
                run = take_run(s, run, take.lease, now, take.lease_seconds)
            appended = s.append(run_id, events, now)
            if take is not None and s.kill is None:
                take.claimed = ClaimedRun(fresh(run), appended)
        self._handed_over(take)
        return fresh(run)

    async def get_run(self, run_id: str) -> Run:
        return fresh(self.state.run(run_id))

    async def list_runs(self, *, limit: int = 100, status: RunStatus | None = None) -> list[Run]:
        runs = [r for r in self.state.runs.values() if status is None or r.status is status]
        runs.sort(key=lambda r: r.created_at, reverse=True)
        return fresh(runs[:limit])

    async def runs_with_status(self, status: RunStatus) -> list[str]:
        return [r.id for r in self.state.runs.values() if r.status is status]

    async def skill_usage_since(self, skill: str, since: datetime) -> Usage:
        runs = [r for r in self.state.runs.values() if r.skill == skill and r.created_at >= since]
        return Usage(
            tokens=sum(r.usage.tokens for r in runs),
            cost_usd=sum(r.usage.cost_usd for r in runs),
            steps=sum(r.usage.steps for r in runs),
        )

    async def claim_runs(
        self, *, lease: str, now: datetime, lease_seconds: float, limit: int
    ) -> list[ClaimedRun]:
        with self.transaction() as s:
            if s.kill is not None:
                return []
            runs = [r for r in s.runs.values() if _claimable(r, now)]
            runs.sort(key=lambda r: (r.created_at, r.id))
            taken = [take_run(s, r, lease, now, lease_seconds) for r in runs[:limit]]
            return [ClaimedRun(fresh(r), s.log(r.id)) for r in taken]

    async def renew_lease(
        self, run_id: str, *, lease: str, now: datetime, lease_seconds: float
    ) -> Run:
        with self.transaction() as s:
            run = s.runs.get(run_id)
            if run is None or run.lease_owner != lease or run.status is not RunStatus.RUNNING:
                raise LeaseLost(run_id)
            renewed = replace(run, lease_expires_at=now + timedelta(seconds=lease_seconds))
            s.runs[run_id] = renewed
            return fresh(renewed)

    async def set_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        lease: str | None,
        now: datetime,
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        killed_by: str | None = None,
    ) -> Run:
        with self.transaction() as s:
            return fresh(
                _set_status(s, run_id, status, lease, now, result, error, usage, killed_by)
            )

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        lease: str | None,
        now: datetime,
        events: Sequence[NewEvent],
        unread: Item,
        targets: Sequence[Target],
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        killed_by: str | None = None,
    ) -> Run:
        with self.transaction() as s:
            run = _set_status(s, run_id, status, lease, now, result, error, usage, killed_by)
            s.append(run_id, events, now)
            s.close_pending(run_id, status=ItemStatus.CANCELLED, now=now)
            s.insert_item(unread, targets, now)
            return fresh(run)

    async def requeue(self, run_id: str, *, now: datetime, events: Sequence[NewEvent] = ()) -> Run:
        with self.transaction() as s:
            run = s.run(run_id)
            transition(run.status, RunStatus.QUEUED)
            # As in SQL the lease is left as it was: a queued run is claimable whoever held it.
            run = replace(
                run, status=RunStatus.QUEUED, updated_at=now, finished_at=None, error=None
            )
            s.runs[run_id] = run
            s.append(run_id, events, now)
            return fresh(run)

    async def append_events(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        *,
        lease: str | None,
        now: datetime,
        usage: Usage | None = None,
    ) -> list[Event]:
        with self.transaction() as s:
            return s.append(run_id, events, now, lease=lease, usage=usage)

    async def add_budget(
        self,
        run_id: str,
        extra: dict[str, float],
        *,
        lease: str | None,
        now: datetime,
        event: NewEvent,
    ) -> list[Event]:
        with self.transaction() as s:
            appended = s.append(run_id, [event], now, lease=lease)
            run = s.run(run_id)
            merged = dict(run.budget_extra)
            for k, v in extra.items():
                merged[k] = merged.get(k, 0) + v
            s.runs[run_id] = replace(run, budget_extra=merged)
            return appended

    async def events(self, run_id: str) -> list[Event]:
        return self.state.log(run_id)


def _set_status(
    s: MemoryState,
    run_id: str,
    status: RunStatus,
    lease: str | None,
    now: datetime,
    result: str | None,
    error: str | None,
    usage: Usage | None,
    killed_by: str | None,
) -> Run:
    s.run(run_id)
    if lease is not None:
        s.held(run_id, lease)
    changes: dict[str, object] = {}
    if status.terminal:
        changes["finished_at"] = now
    given = {"result": result, "error": error, "usage": usage, "killed_by": killed_by}
    changes.update({k: v for k, v in given.items() if v is not None})
    return s.move(run_id, status, now, **changes)
