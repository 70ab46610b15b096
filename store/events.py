"""A run's event log in SQL: numbering and appending events, and reading them back.

Appending is shared by every write that records why it happened (a run's step, an item and
its decision, a reminder): each calls `append_events` inside its own transaction, so the
event and the change it explains are committed together. Appending bumps `runs.last_seq` in
one UPDATE that also checks the lease (fencing), so numbering an event costs no extra query
and two writers can never take the same number.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Integer, Table, bindparam, insert, select, update

from agent.errors import NotFound
from agent.events import load_event
from agent.model import EVENT_SCHEMA_VERSION, Event, NewEvent, Run, RunStatus, Usage
from agent.store import LeaseLost
from store.tables import EventRow, RunRow, UtcDateTime

RUNS = cast(Table, RunRow.__table__)
EVENTS = cast(Table, EventRow.__table__)

_RUNNING = RunStatus.RUNNING.value

# Built once: building and caching a statement on each call costs more than executing it.
SELECT_EVENTS = (
    select(EVENTS.c.run_id, EVENTS.c.seq, EVENTS.c.kind, EVENTS.c.data, EVENTS.c.at)
    .add_columns(EVENTS.c.version)
    .where(EVENTS.c.run_id == bindparam("run_id"))
    .order_by(EVENTS.c.seq)
)
_INSERT_EVENTS = insert(EVENTS)


def _bump(fenced: bool, usage: bool) -> Any:
    """Take `n` event numbers for a run, checking the lease when `fenced`, and record the
    run's usage so far when `usage`."""
    stmt = update(RUNS).where(RUNS.c.id == bindparam("run_id"))
    if fenced:
        stmt = stmt.where(RUNS.c.lease_owner == bindparam("lease"), RUNS.c.status == _RUNNING)
    values: dict[str, Any] = {"last_seq": RUNS.c.last_seq + bindparam("n", type_=Integer())}
    if usage:
        values.update(
            tokens=bindparam("u_tokens"),
            cost_usd=bindparam("u_cost"),
            steps=bindparam("u_steps"),
            cost_known=bindparam("u_known"),
            updated_at=bindparam("now", type_=UtcDateTime()),
        )
    return stmt.values(**values).returning(RUNS.c.last_seq)


_BUMP = {(f, u): _bump(f, u) for f in (False, True) for u in (False, True)}


def run_of(row: Any) -> Run:
    """A `Run` from a `runs` row: an ORM object or a Core row (same attribute names)."""
    return Run(
        id=row.id,
        skill=row.skill,
        status=RunStatus(row.status),
        input=row.input,
        trigger=row.trigger,
        created_at=row.created_at,
        updated_at=row.updated_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        result=row.result,
        error=row.error,
        usage=Usage(
            tokens=row.tokens, cost_usd=row.cost_usd, steps=row.steps, cost_known=row.cost_known
        ),
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        budget_extra=dict(row.budget_extra or {}),
        killed_by=row.killed_by,
    )


def event_of(row: Any) -> Event:
    return load_event(
        run_id=row.run_id,
        seq=row.seq,
        kind=row.kind,
        data=row.data,
        at=row.at,
        version=row.version,
    )


def read_events(c: Connection, run_id: str) -> list[Event]:
    return [event_of(r) for r in c.execute(SELECT_EVENTS, {"run_id": run_id})]


def append_events(
    c: Connection,
    run_id: str,
    events: Sequence[NewEvent],
    now: datetime,
    *,
    lease: str | None = None,
    usage: Usage | None = None,
) -> list[Event]:
    """Number and insert `events`. The UPDATE that takes the numbers also checks the lease
    (`lease`) and records `usage`: one statement, and on PostgreSQL it locks the run's
    row, so concurrent appends to one run are numbered one after the other."""
    if not events and lease is None and usage is None:
        return []
    params: dict[str, Any] = {"run_id": run_id, "n": len(events), "lease": lease}
    if usage is not None:
        params.update(
            u_tokens=usage.tokens,
            u_cost=usage.cost_usd,
            u_steps=usage.steps,
            u_known=usage.cost_known,
            now=now,
        )
    last = c.execute(_BUMP[(lease is not None, usage is not None)], params).scalar()
    if last is None:
        if lease is not None:
            raise LeaseLost(run_id)
        raise NotFound(f"no run {run_id}")
    first = int(last) - len(events) + 1
    appended = [
        Event(
            run_id=run_id, seq=first + i, payload=ev.payload, at=now, version=EVENT_SCHEMA_VERSION
        )
        for i, ev in enumerate(events)
    ]
    if appended:
        c.execute(
            _INSERT_EVENTS,
            [
                {
                    "run_id": e.run_id,
                    "seq": e.seq,
                    "kind": e.kind.value,
                    "data": e.data,
                    "at": e.at,
                    "version": e.version,
                }
                for e in appended
            ],
        )
    return appended
