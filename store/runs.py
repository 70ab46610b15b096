"""The run store in SQL: runs, their leases, and their event logs.

On PostgreSQL many workers in many processes share the database: a claim takes a row with
`FOR UPDATE SKIP LOCKED`, and every write that belongs to a run's owner checks the lease in
the same statement (fencing). There a run's creation is one statement
(`pizzabot.store.new_run`), and a step's appends go to asyncpg itself (`Database.direct`).
A run's end is one transaction: its status, its last events, its pending actions closed and
its Unread item with the deliveries (`finish_run`).
Implements `pizzabot.agent.store.RunStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Integer, and_, bindparam, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import Event, NewEvent
from pizzabot.agent.handover import ClaimedRun, HandsOver
from pizzabot.agent.model import Item, ItemStatus, Run, RunStatus, Target, Usage, transition
from pizzabot.agent.store import LeaseLost
from pizzabot.store import new_run
from pizzabot.store.database import Database, orm
from pizzabot.store.events import (
    RUNS,
    append_events,
    append_statement,
    as_appended,
    read_events,
    run_of,
)
from pizzabot.store.inbox import close_pending, insert_item
from pizzabot.store.switches import kill_switch
from pizzabot.store.tables import RunRow, UtcDateTime

_RUNNING = RunStatus.RUNNING.value

# The statements of a run's every step, built once: building and caching a statement on each
# call costs more than executing it.
_SELECT_RUN = select(RUNS).where(RUNS.c.id == bindparam("run_id"))
_NOW = bindparam("now", type_=UtcDateTime())


def _moved(
    status: RunStatus, now: datetime, usage: Usage | None, **ended: str | None
) -> dict[str, Any]:
    """The columns a run moved to `status` at `now` changes, with `usage` and those of
    `ended` (result, error, killed_by) that are given."""
    out: dict[str, Any] = {"status": status.value, "updated_at": now}
    out.update((column, value) for column, value in ended.items() if value is not None)
    if status is not RunStatus.RUNNING:
        out.update(lease_owner=None, lease_expires_at=None)
    if status.terminal:
        out["finished_at"] = now
    if usage is not None:
        out.update(
            tokens=usage.tokens,
            cost_usd=usage.cost_usd,
            steps=usage.steps,
            cost_known=usage.cost_known,
        )
    return out


def _claimable(now: Any) -> Any:
    return or_(
        RUNS.c.status == RunStatus.QUEUED.value,
        and_(RUNS.c.status == _RUNNING, RUNS.c.lease_expires_at < now),
    )


def _claim(postgres: bool) -> Any:
    """One statement: pick the `n` oldest claimable runs, by creation (on PostgreSQL skipping
    rows another worker is taking at this moment), and take them, returning the claimed rows."""
    pick = (
        select(RUNS.c.id)
        .where(_claimable(_NOW))
        .order_by(RUNS.c.created_at)
        .limit(bindparam("n", type_=Integer()))
    )
    take = update(RUNS).values(
        status=_RUNNING,
        lease_owner=bindparam("lease"),
        lease_expires_at=bindparam("expires", type_=UtcDateTime()),
        updated_at=_NOW,
        started_at=func.coalesce(RUNS.c.started_at, _NOW),
    )
    if postgres:
        # Picked once, in a CTE: as `id IN (subquery)` the planner may run the locking
        # subquery more than once, and concurrent claims then come back empty.
        picked = pick.with_for_update(skip_locked=True).cte("picked")
        take = take.where(RUNS.c.id == picked.c.id)
    else:
        take = take.where(RUNS.c.id.in_(pick.scalar_subquery()))
    return take.where(_claimable(_NOW)).returning(*RUNS.c)


_CLAIM = {False: _claim(False), True: _claim(True)}


_RENEW = (
    update(RUNS)
    .where(
        RUNS.c.id == bindparam("run_id"),
        RUNS.c.lease_owner == bindparam("lease"),
        RUNS.c.status == _RUNNING,
    )
    .values(lease_expires_at=bindparam("expires", type_=UtcDateTime()))
    .returning(*RUNS.c)
)


def _age(run: Run) -> tuple[datetime, str]:
    return (run.created_at, run.id)


class SqlRuns(HandsOver):
    def __init__(self, db: Database) -> None:
        self.db = db

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
        postgres = self.db.is_postgres
        if idempotency_key is not None and not postgres:
            existing = await self._by_idempotency(idempotency_key)
            if existing is not None:
                return existing
        take = self._offer()
        new = new_run.NewRun(run_id, skill, input, trigger, now, events, idempotency_key, take)

        def one(c: Connection) -> Run | None:
            return new_run.in_one_statement(c, new)

        def tx(s: Session) -> Run:
            run = new_run.in_transaction(s, new)
            if take is None or take.claimed is None:
                self.db.notify_runnable(s.connection(), run_id)
            return run

        run: Run | None
        try:
            if postgres:
                run = await self.db.run(one, one_statement=True)
            else:
                run = await self.db.run(orm(tx))
        except IntegrityError:
            if idempotency_key is None:
                raise
            existing = await self._by_idempotency(idempotency_key)
            if existing is None:
                raise
            return existing
        if run is None:  # PostgreSQL: the idempotency key is an earlier run's; nothing written
            assert idempotency_key is not None
            existing = await self._by_idempotency(idempotency_key)
            if existing is None:  # runs are never deleted: only by hand, and then just now
                raise NotFound(f"the run holding the idempotency key of {run_id} is gone")
            return existing
        self._handed_over(take)
        return run

    async def _by_idempotency(self, key: str) -> Run | None:
        def tx(c: Connection) -> Run | None:
            row = c.execute(select(RUNS).where(RUNS.c.idempotency_key == key)).first()
            return run_of(row) if row else None

        return await self.db.read(tx)

    async def get_run(self, run_id: str) -> Run:
        def tx(c: Connection) -> Run:
            row = c.execute(_SELECT_RUN, {"run_id": run_id}).first()
            if row is None:
                raise NotFound(f"no run {run_id}")
            return run_of(row)

        return await self.db.read(tx)

    async def list_runs(self, *, limit: int = 100, status: RunStatus | None = None) -> list[Run]:
        def tx(c: Connection) -> list[Run]:
            q = select(RUNS).order_by(RUNS.c.created_at.desc()).limit(limit)
            if status is not None:
                q = q.where(RUNS.c.status == status.value)
            return [run_of(r) for r in c.execute(q)]

        return await self.db.run(tx)

    async def runs_with_status(self, status: RunStatus) -> list[str]:
        def tx(c: Connection) -> list[str]:
            q = select(RUNS.c.id).where(RUNS.c.status == status.value)
            return list(c.execute(q).scalars())

        return await self.db.run(tx)

    async def release_leases(self, *, now: datetime) -> int:
        """Expire every lease now: for a single-process server (SQLite) at start, whose old
        leases can only belong to a process that died."""

        def tx(c: Connection) -> int:
            result = c.execute(
                update(RUNS).where(RUNS.c.status == _RUNNING).values(lease_expires_at=now)
            )
            return int(result.rowcount)

        return await self.db.run(tx)

    async def skill_usage_since(self, skill: str, since: datetime) -> Usage:
        def tx(c: Connection) -> Usage:
            row = c.execute(
                select(
                    func.coalesce(func.sum(RUNS.c.tokens), 0),
                    func.coalesce(func.sum(RUNS.c.cost_usd), 0.0),
                    func.coalesce(func.sum(RUNS.c.steps), 0),
                ).where(RUNS.c.skill == skill, RUNS.c.created_at >= since)
            ).one()
            return Usage(tokens=int(row[0]), cost_usd=float(row[1]), steps=int(row[2]))

        return await self.db.run(tx)

    async def claim_runs(
        self, *, lease: str, now: datetime, lease_seconds: float, limit: int
    ) -> list[ClaimedRun]:
        claim = _CLAIM[self.db.is_postgres]
        params = {
            "now": now,
            "lease": lease,
            "expires": now + timedelta(seconds=lease_seconds),
            "n": limit,
        }

        def tx(c: Connection) -> list[ClaimedRun]:
            # Read in the same transaction as the claim: once the switch is seen on, no run is
            # taken, and no separate round trip is paid for it on every wake-up.
            if kill_switch(c) is not None:
                return []
            # RETURNING gives no order; oldest first, as they were picked.
            runs = sorted((run_of(row) for row in c.execute(claim, params)), key=_age)
            return [ClaimedRun(run, read_events(c, run.id)) for run in runs]

        return await self.db.run(tx)

    async def claim_run(self, *, lease: str, now: datetime, lease_seconds: float) -> Run | None:
        """`claim_runs` for one run (for tests and tools: workers claim in batches)."""
        claimed = await self.claim_runs(lease=lease, now=now, lease_seconds=lease_seconds, limit=1)
        return claimed[0].run if claimed else None

    async def renew_lease(
        self, run_id: str, *, lease: str, now: datetime, lease_seconds: float
    ) -> Run:
        params = {
            "run_id": run_id,
            "lease": lease,
            "expires": now + timedelta(seconds=lease_seconds),
        }

        def tx(c: Connection) -> Run:
            row = c.execute(_RENEW, params).first()
            if row is None:
                raise LeaseLost(run_id)
            return run_of(row)

        return await self.db.run(tx)

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
        def tx(s: Session) -> Run:
            return self._set_status(
                s,
                run_id,
                status,
                lease=lease,
                now=now,
                result=result,
                error=error,
                usage=usage,
                killed_by=killed_by,
            )

        return await self.db.run(orm(tx))

    def _set_status(
        self,
        s: Session,
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
        q = select(RunRow).where(RunRow.id == run_id)
        if self.db.is_postgres:
            q = q.with_for_update()
        row = s.execute(q).scalar_one_or_none()
        if row is None:
            raise NotFound(f"no run {run_id}")
        if lease is not None and (row.lease_owner != lease or row.status != _RUNNING):
            raise LeaseLost(run_id)
        current = RunStatus(row.status)
        if current is not status:
            transition(current, status)
        moved = _moved(status, now, usage, result=result, error=error, killed_by=killed_by)
        for column, value in moved.items():
            setattr(row, column, value)
        return run_of(row)

    async def requeue(self, run_id: str, *, now: datetime, events: Sequence[NewEvent] = ()) -> Run:
        def tx(s: Session) -> Run:
            row = s.get(RunRow, run_id)
            if row is None:
                raise NotFound(f"no run {run_id}")
            transition(RunStatus(row.status), RunStatus.QUEUED)
            row.status = RunStatus.QUEUED.value
            row.updated_at = now
            row.finished_at = None
            row.error = None
            s.flush()
            c = s.connection()
            append_events(c, run_id, events, now)
            self.db.notify_runnable(c, run_id)
            return run_of(row)

        return await self.db.run(orm(tx))

    async def add_budget(
        self,
        run_id: str,
        extra: dict[str, float],
        *,
        lease: str | None,
        now: datetime,
        event: NewEvent,
    ) -> list[Event]:
        def tx(s: Session) -> list[Event]:
            appended = append_events(s.connection(), run_id, [event], now, lease=lease)
            row = s.get(RunRow, run_id)
            if row is None:
                raise NotFound(f"no run {run_id}")
            merged = dict(row.budget_extra or {})
            for k, v in extra.items():
                merged[k] = merged.get(k, 0) + v
            row.budget_extra = merged
            return appended

        return await self.db.run(orm(tx))

    async def append_events(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        *,
        lease: str | None,
        now: datetime,
        usage: Usage | None = None,
    ) -> list[Event]:
        if events and self.db.is_postgres:
            # One statement (see `append_events`), sent in autocommit on asyncpg itself: a
            # step's every reply and tool result comes this way.
            statement, params = append_statement(run_id, events, now, lease, usage)
            rows = await self.db.direct(statement, params)
            return as_appended(run_id, (row[0] for row in rows), events, now, lease)

        def tx(c: Connection) -> list[Event]:
            return append_events(c, run_id, events, now, lease=lease, usage=usage)

        return await self.db.run(tx, one_statement=True)

    async def events(self, run_id: str) -> list[Event]:
        def tx(c: Connection) -> list[Event]:
            return read_events(c, run_id)

        return await self.db.read(tx)

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
        values = _moved(status, now, usage, result=result, error=error, killed_by=killed_by)

        def tx(c: Connection) -> Run:
            run = self._end_run(c, run_id, status, lease=lease, values=values)
            append_events(c, run_id, events, now)
            close_pending(c, run_id, status=ItemStatus.CANCELLED, now=now)
            insert_item(c, unread, targets, now)
            return run

        return await self.db.run(tx)

    def _end_run(
        self, c: Connection, run_id: str, status: RunStatus, *, lease: str | None, values: Any
    ) -> Run:
        """Move the run to `status` with `values`, in one UPDATE where the lease is known
        (the worker's end of a run); else after reading, and locking, where it is now."""
        held: tuple[Any, ...]
        if lease is not None:
            transition(RunStatus.RUNNING, status)
            held = (RUNS.c.lease_owner == lease, RUNS.c.status == _RUNNING)
        else:
            now_at = select(RUNS.c.status).where(RUNS.c.id == run_id)
            current = c.execute(
                now_at.with_for_update() if self.db.is_postgres else now_at
            ).scalar_one_or_none()
            if current is None:
                raise NotFound(f"no run {run_id}")
            if current != status.value:
                transition(RunStatus(current), status)
            held = (RUNS.c.status == current,)
        moved = update(RUNS).where(RUNS.c.id == run_id, *held).values(values)
        row = c.execute(moved.returning(*RUNS.c)).first()
        if row is None:
            if c.execute(_SELECT_RUN, {"run_id": run_id}).first() is None:
                raise NotFound(f"no run {run_id}")
            raise LeaseLost(run_id)
        return run_of(row)
