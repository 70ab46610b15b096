"""Creating a run: its row, its first events, and its hand-over to this process's worker or
the wake-up of every worker, written together.

On SQLite that is one transaction of the ORM (`in_transaction`). On PostgreSQL it is one
statement (`in_one_statement`), sent in autocommit: one round trip where a transaction of
its parts is five (BEGIN, the kill switch, the run, its events with their numbers, COMMIT).
The statement reads the kill switch, inserts the run (claimed under the offered lease unless
the switch is on) and its events numbered from 1, and NOTIFYs the workers when the run was
queued; PostgreSQL delivers the NOTIFY when the statement commits. An idempotency key that is
taken inserts nothing at all (ON CONFLICT DO NOTHING), and the caller reads the earlier run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Connection,
    Float,
    Integer,
    Text,
    bindparam,
    case,
    exists,
    func,
    insert,
    literal,
    null,
    select,
    true,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.orm import Session

from pizzabot.agent.events import NewEvent
from pizzabot.agent.handover import ClaimedRun, Take
from pizzabot.agent.model import EVENT_SCHEMA_VERSION, Run, RunStatus
from pizzabot.store.events import EVENTS, RUNS, append_events, numbered, run_of
from pizzabot.store.pg import RUNS_CHANNEL
from pizzabot.store.switches import KILL, SWITCHES, kill_switch
from pizzabot.store.tables import RunRow, UtcDateTime

_QUEUED = RunStatus.QUEUED.value
_RUNNING = RunStatus.RUNNING.value


def _param(column: str) -> Any:
    return bindparam(column, type_=RUNS.c[column].type)


def _claim(take: bool, now: Any) -> tuple[Any, tuple[Any, Any, Any, Any]]:
    """The kill switch's subquery (None when the run is not taken) and the run's status,
    lease owner, lease expiry and start: claimed under the bound lease unless the switch is
    on (then it queues)."""
    if not take:
        return None, (literal(_QUEUED), null(), null(), null())
    on = SWITCHES.c.value["on"].as_string() == "true"
    switch = select(exists().where(SWITCHES.c.name == KILL, on).label("killed")).subquery()
    killed = switch.c.killed
    return switch, (
        case((killed, literal(_QUEUED)), else_=literal(_RUNNING)),
        case((killed, null()), else_=_param("lease_owner")),
        case((killed, null()), else_=_param("lease_expires_at")),
        case((killed, null()), else_=now),
    )


def _create(take: bool) -> Any:
    """The run's INSERT, its events' INSERT and the NOTIFY as one statement; `take`: the run
    is claimed under the bound lease unless the kill switch is on (then it queues)."""
    now = bindparam("now", type_=UtcDateTime())
    switch, (status, lease, expires, started) = _claim(take, now)
    values = {
        "id": _param("id"),
        "skill": _param("skill"),
        "status": status,
        "input": _param("input"),
        "trigger": _param("trigger"),
        "created_at": now,
        "updated_at": now,
        "started_at": started,
        "tokens": literal(0, Integer()),
        "cost_usd": literal(0.0, Float()),
        "steps": literal(0, Integer()),
        "cost_known": literal(True, Boolean()),
        "lease_owner": lease,
        "lease_expires_at": expires,
        "budget_extra": sql_cast(literal("{}"), JSON()),
        "idempotency_key": _param("idempotency_key"),
        "last_seq": bindparam("n", type_=Integer()),
    }
    row = select(*values.values())
    if switch is not None:
        row = row.select_from(switch)
    run = (
        pg_insert(RUNS)
        .from_select(list(values), row)
        .on_conflict_do_nothing(index_elements=[RUNS.c.idempotency_key])
        .returning(*RUNS.c)
        .cte("run")
    )
    new = (
        func.unnest(
            bindparam("kinds", type_=ARRAY(Text())), bindparam("datas", type_=ARRAY(Text()))
        )
        .table_valued("kind", "data", with_ordinality="ord")
        .render_derived(name="new")
    )
    logged = insert(EVENTS).from_select(
        ["run_id", "seq", "kind", "data", "at", "version"],
        select(
            run.c.id,
            new.c.ord,
            new.c.kind,
            sql_cast(new.c.data, JSON()),
            now,
            bindparam("version", type_=Integer()),
        ).select_from(run.join(new, true())),
    )
    woken = (
        select(func.pg_notify(bindparam("channel", type_=Text()), run.c.id))
        .where(run.c.status == _QUEUED)
        .cte("woken")
    )
    # A SELECT in WITH runs only as far as the main query reads it: read the NOTIFY's.
    notified = select(func.count()).select_from(woken).scalar_subquery()
    return select(*run.c, notified.label("notified")).add_cte(logged.cte("logged"))


_CREATE = {False: _create(False), True: _create(True)}


@dataclass(frozen=True)
class NewRun:
    """A run to create: its row's values, its first events, and the hand-over to this
    process's worker it is offered to (None: queue it)."""

    run_id: str
    skill: str
    input: str
    trigger: str
    now: datetime
    events: Sequence[NewEvent]
    idempotency_key: str | None
    take: Take | None


def in_one_statement(c: Connection, new: NewRun) -> Run | None:
    """PostgreSQL: create the run in one statement (see the module docstring); None when
    its idempotency key belongs to another run. `new.take.claimed` is set when it was taken."""
    take, events, now = new.take, new.events, new.now
    params: dict[str, Any] = {
        "id": new.run_id,
        "skill": new.skill,
        "input": new.input,
        "trigger": new.trigger,
        "now": now,
        "idempotency_key": new.idempotency_key,
        "n": len(events),
        "kinds": [ev.kind.value for ev in events],
        "datas": [json.dumps(ev.data) for ev in events],
        "version": EVENT_SCHEMA_VERSION,
        "channel": RUNS_CHANNEL,
    }
    if take is not None:
        take.claimed = None  # a try before this one may not have reached the server
        params["lease_owner"] = take.lease
        params["lease_expires_at"] = now + timedelta(seconds=take.lease_seconds)
    row = c.execute(_CREATE[take is not None], params).first()
    if row is None:
        return None
    run = run_of(row)
    if take is not None and run.status is RunStatus.RUNNING:
        take.claimed = ClaimedRun(run, numbered(new.run_id, len(events), events, now))
    return run


def _new_row(
    run_id: str, skill: str, input: str, trigger: str, now: datetime, key: str | None
) -> RunRow:
    """A queued run's row, with nothing used yet."""
    return RunRow(
        id=run_id,
        skill=skill,
        status=_QUEUED,
        input=input,
        trigger=trigger,
        created_at=now,
        updated_at=now,
        tokens=0,
        cost_usd=0.0,
        steps=0,
        cost_known=True,
        budget_extra={},
        idempotency_key=key,
        last_seq=0,
    )


def in_transaction(s: Session, new: NewRun) -> Run:
    """Create the run in the session's transaction (SQLite's way), setting `new.take.claimed`
    when the run was taken; the caller wakes the workers when it was not."""
    c, take, now = s.connection(), new.take, new.now
    if take is not None:
        take.claimed = None  # a try before this one may have rolled back
    # Taken at once unless the kill switch is on: then it queues, as any new run.
    taken = take is not None and kill_switch(c) is None
    row = _new_row(new.run_id, new.skill, new.input, new.trigger, now, new.idempotency_key)
    if take is not None and taken:
        row.status = _RUNNING
        row.lease_owner = take.lease
        row.lease_expires_at = now + timedelta(seconds=take.lease_seconds)
        row.started_at = now
    s.add(row)
    s.flush()
    appended = append_events(c, new.run_id, new.events, now)
    run = run_of(row)
    if take is not None and taken:
        take.claimed = ClaimedRun(run, appended)
    return run
