"""A run's event log in SQL: numbering and appending events, and reading them back.

Appending is shared by every write that records why it happened (a run's step, an item and
its decision, a reminder): each calls `append_events` inside its own transaction, so the
event and the change it explains are committed together. Appending bumps `runs.last_seq` in
one UPDATE that also checks the lease (fencing), so numbering an event costs no extra query
and two writers can never take the same number. On PostgreSQL that UPDATE and the INSERT of
the events are one statement, so an append on its own (a step's reply, a tool's result) is one
round trip in autocommit rather than BEGIN, two statements and COMMIT.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Connection,
    Integer,
    Table,
    Text,
    bindparam,
    func,
    insert,
    literal_column,
    select,
    true,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY

from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import Event, NewEvent, load_event
from pizzabot.agent.model import EVENT_SCHEMA_VERSION, Run, RunStatus, Usage
from pizzabot.agent.store import LeaseLost
from pizzabot.store.direct import sqlite_many, sqlite_rows
from pizzabot.store.tables import EventRow, RunRow, UtcDateTime

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
_EVENT_COLUMNS = ("run_id", "seq", "kind", "data", "at", "version")
_INSERT_EVENTS = insert(EVENTS).values({name: bindparam(name) for name in _EVENT_COLUMNS})


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


def _bump_and_insert(fenced: bool, usage: bool) -> Any:
    """PostgreSQL: `_bump` and the INSERT of the events it numbers as one statement, so an
    append outside a larger transaction is one round trip (a statement is its own
    transaction). The events come as arrays of kinds and JSON texts, numbered in order."""
    bump = _bump(fenced, usage).cte("bump")
    new = (
        func.unnest(
            bindparam("kinds", type_=ARRAY(Text())), bindparam("datas", type_=ARRAY(Text()))
        )
        .table_valued("kind", "data", with_ordinality="ord")
        .render_derived(name="new")
    )
    rows = select(
        bindparam("run_id", type_=Text()),
        bump.c.last_seq - bindparam("n", type_=Integer()) + new.c.ord,
        new.c.kind,
        sql_cast(new.c.data, JSON()),
        bindparam("at", type_=UtcDateTime()),
        bindparam("version", type_=Integer()),
    ).select_from(bump.join(new, true()))
    columns = ["run_id", "seq", "kind", "data", "at", "version"]
    return insert(EVENTS).from_select(columns, rows).add_cte(bump).returning(literal_column("seq"))


_BUMP_AND_INSERT = {(f, u): _bump_and_insert(f, u) for f in (False, True) for u in (False, True)}


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


def _bump_params(
    run_id: str, n: int, lease: str | None, usage: Usage | None, now: datetime
) -> dict[str, Any]:
    params: dict[str, Any] = {"run_id": run_id, "n": n, "lease": lease}
    if usage is not None:
        params.update(
            u_tokens=usage.tokens,
            u_cost=usage.cost_usd,
            u_steps=usage.steps,
            u_known=usage.cost_known,
            now=now,
        )
    return params


def numbered(run_id: str, last: int, events: Sequence[NewEvent], now: datetime) -> list[Event]:
    """`events` as appended to the run's log when the last of them took the number `last`."""
    first = last - len(events) + 1
    return [
        Event(
            run_id=run_id, seq=first + i, payload=ev.payload, at=now, version=EVENT_SCHEMA_VERSION
        )
        for i, ev in enumerate(events)
    ]


def _first(rows: list[Any]) -> Any:
    return rows[0][0] if rows else None


def _not_appended(run_id: str, lease: str | None) -> Exception:
    return LeaseLost(run_id) if lease is not None else NotFound(f"no run {run_id}")


def append_statement(
    run_id: str,
    events: Sequence[NewEvent],
    now: datetime,
    lease: str | None,
    usage: Usage | None,
) -> tuple[Any, dict[str, Any]]:
    """PostgreSQL: the one statement that appends `events` (see `append_events`), and its
    parameters; `as_appended` reads what it returns."""
    params = _bump_params(run_id, len(events), lease, usage, now)
    params.update(
        kinds=[ev.kind.value for ev in events],
        datas=[json.dumps(ev.data) for ev in events],
        at=now,
        version=EVENT_SCHEMA_VERSION,
    )
    return _BUMP_AND_INSERT[(lease is not None, usage is not None)], params


def as_appended(
    run_id: str, seqs: Iterable[int], events: Sequence[NewEvent], now: datetime, lease: str | None
) -> list[Event]:
    """The events `append_statement` numbered `seqs`: LeaseLost (or NotFound without a
    lease) when it numbered none."""
    last = max(seqs, default=None)
    if last is None:
        raise _not_appended(run_id, lease)
    return numbered(run_id, int(last), events, now)


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
    (`lease`) and records `usage`, and on PostgreSQL it locks the run's row, so concurrent
    appends to one run are numbered one after the other. On PostgreSQL the UPDATE and the
    INSERT are one statement: one round trip, and a connection in autocommit can run it as
    a transaction of its own (the numbers, the lease check, the usage and the events are
    written together or not at all)."""
    if not events and lease is None and usage is None:
        return []
    postgres = c.dialect.name == "postgresql"
    if events and postgres:
        statement, params = append_statement(run_id, events, now, lease, usage)
        return as_appended(run_id, c.execute(statement, params).scalars(), events, now, lease)
    params = _bump_params(run_id, len(events), lease, usage, now)
    bump = _BUMP[(lease is not None, usage is not None)]
    # SQLite: the statements go on `sqlite3` itself, in `c`'s transaction
    # (`pizzabot.store.direct`).
    last = c.execute(bump, params).scalar() if postgres else _first(sqlite_rows(c, bump, params))
    if last is None:
        raise _not_appended(run_id, lease)
    appended = numbered(run_id, int(last), events, now)
    if appended:
        sqlite_many(
            c,
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
