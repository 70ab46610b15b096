"""`SqlStore`: the engine's `Store` on SQLAlchemy 2, for SQLite and PostgreSQL.

On PostgreSQL many workers in many processes share the database: a claim takes a row with
`FOR UPDATE SKIP LOCKED`, and every write that belongs to a run's owner checks the lease in
the same statement (fencing). Appending events bumps `runs.last_seq` in that fenced UPDATE,
so numbering an event costs no extra query and two writers can never take the same number.

Every method is one transaction, written as a plain function of a `Connection` (or of a
`Session` where the ORM earns its keep), and run in one go:
- on PostgreSQL through asyncpg (`run_sync`: no threads);
- on SQLite, on the event loop itself. A local SQLite transaction takes a fraction of a
  millisecond of CPU, and under the GIL a thread does not run it any sooner: aiosqlite's hop
  to its thread and back for every statement, fetch, BEGIN and COMMIT cost more than the SQL
  (`pizzabot bench` measured a step's store time going from ~40 ms to a few). Only when
  another process holds the database (SQLite's one writer) does the wait move to a thread
  of the store's own, so the loop is never blocked for longer than a short busy timeout.
  An asyncio lock queues this process's transactions, so they never meet each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import (
    Connection,
    Engine,
    Integer,
    Table,
    and_,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from agent.context import new_id
from agent.errors import AlreadyDecided, NotFound
from agent.events import load_event
from agent.model import (
    EVENT_SCHEMA_VERSION,
    AuditEntry,
    Box,
    Decision,
    Delivery,
    DeliveryStatus,
    Event,
    Item,
    ItemKind,
    ItemStatus,
    NewEvent,
    Risk,
    Run,
    RunStatus,
    Target,
    Usage,
    transition,
)
from agent.store import Claimed, LeaseLost
from store.tables import (
    AuditRow,
    DeliveryRow,
    EventRow,
    ItemRow,
    RunRow,
    SwitchRow,
    UtcDateTime,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

KILL = "kill"
_DECIDED_STATUS = {
    "approve": ItemStatus.APPROVED,
    "edit": ItemStatus.EDITED,
    "reject": ItemStatus.REJECTED,
    "expired": ItemStatus.EXPIRED,
}
_RUNNING = RunStatus.RUNNING.value

RUNS = cast(Table, RunRow.__table__)
EVENTS = cast(Table, EventRow.__table__)
ITEMS = cast(Table, ItemRow.__table__)
DELIVERIES = cast(Table, DeliveryRow.__table__)
SWITCHES = cast(Table, SwitchRow.__table__)
AUDIT = cast(Table, AuditRow.__table__)

#: How long a transaction on the event loop waits for another process's write before the wait
#: moves to the store's thread (where it may take up to `_BUSY_WAIT_MS`).
_BUSY_INLINE_MS = 50
_BUSY_WAIT_MS = 30_000

# The statements of a run's every step, built once: building and caching a statement on each
# call costs more than executing it.
_SELECT_RUN = select(RUNS).where(RUNS.c.id == bindparam("run_id"))
_SELECT_EVENTS = (
    select(EVENTS.c.run_id, EVENTS.c.seq, EVENTS.c.kind, EVENTS.c.data, EVENTS.c.at)
    .add_columns(EVENTS.c.version)
    .where(EVENTS.c.run_id == bindparam("run_id"))
    .order_by(EVENTS.c.seq)
)
_INSERT_EVENTS = insert(EVENTS)
_PING = text("SELECT 1")
_SELECT_KILL = select(SWITCHES.c.value).where(SWITCHES.c.name == KILL)
_NOW = bindparam("now", type_=UtcDateTime())
_SELECT_ITEM = select(ITEMS).where(ITEMS.c.id == bindparam("item_id"))


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
        lease_owner=bindparam("worker"),
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


def _bump(fenced: bool, usage: bool) -> Any:
    """Take `n` event numbers for a run, checking the lease when `fenced`, and record the
    run's usage so far when `usage`."""
    stmt = update(RUNS).where(RUNS.c.id == bindparam("run_id"))
    if fenced:
        stmt = stmt.where(RUNS.c.lease_owner == bindparam("worker"), RUNS.c.status == _RUNNING)
    values: dict[str, Any] = {"last_seq": RUNS.c.last_seq + bindparam("n", type_=Integer())}
    if usage:
        values.update(
            tokens=bindparam("u_tokens"),
            cost_usd=bindparam("u_cost"),
            steps=bindparam("u_steps"),
            cost_known=bindparam("u_known"),
            updated_at=_NOW,
        )
    return stmt.values(**values).returning(RUNS.c.last_seq)


_BUMP = {(f, u): _bump(f, u) for f in (False, True) for u in (False, True)}

_DECIDE = (
    update(ITEMS)
    .where(ITEMS.c.id == bindparam("item_id"), ITEMS.c.status == ItemStatus.PENDING.value)
    .values(
        status=bindparam("d_status"),
        decided_by=bindparam("d_actor"),
        decided_via=bindparam("d_via"),
        decided_at=_NOW,
        final_args=bindparam("d_args", type_=ITEMS.c.final_args.type),
        reason=bindparam("d_reason"),
    )
    .returning(*ITEMS.c)
)
_QUEUE_IF_WAITING = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("run_id"), RUNS.c.status == RunStatus.WAITING.value)
    .values(status=RunStatus.QUEUED.value, updated_at=_NOW)
)
_COPIES_NEED_UPDATE = (
    update(DELIVERIES)
    .where(
        DELIVERIES.c.item_id == bindparam("c_item"),
        DELIVERIES.c.status == DeliveryStatus.SENT.value,
    )
    .values(needs_update=True, next_attempt_at=None, updated_at=_NOW)
)
_INSERT_AUDIT = insert(AUDIT)

_RENEW = (
    update(RUNS)
    .where(
        RUNS.c.id == bindparam("run_id"),
        RUNS.c.lease_owner == bindparam("worker"),
        RUNS.c.status == _RUNNING,
    )
    .values(lease_expires_at=bindparam("expires", type_=UtcDateTime()))
    .returning(*RUNS.c)
)


def _pragmas(busy_ms: int) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={busy_ms}")
        cur.close()

    return on_connect


def _private_sqlite_file(url: str) -> None:
    """Make the database file (and its -wal, -shm, -journal) readable by its owner only.

    The database holds item secrets. SQLite creates a file with the process's umask (0644
    usually) but gives -wal, -shm and -journal the mode of the database file, so creating
    the database 0600 first is enough for new files; files left loose by an older start are
    tightened, and the log says so.
    """
    path = make_url(url).database
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    # A missing folder is SQLite's to report, on the first connection, as before.
    with contextlib.suppress(FileExistsError, FileNotFoundError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    for name in (path, f"{path}-wal", f"{path}-shm", f"{path}-journal"):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            os.chmod(name, mode & 0o700)
            log.warning(
                "database file %s was open to other users (mode %03o); made it %03o",
                name,
                mode,
                mode & 0o700,
            )


def connect(url: str, *, echo: bool = False) -> AsyncEngine:
    """An engine for `url`; SQLite gets WAL and a busy timeout so a CLI and a server can share it."""
    if url.startswith("sqlite"):
        _private_sqlite_file(url)
        engine = create_async_engine(url, echo=echo, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _pragmas(_BUSY_WAIT_MS))
        return engine
    # No `pool_pre_ping`: it costs a round trip on every transaction. A connection that died
    # while pooled (a PostgreSQL restart) fails its next transaction before COMMIT; the store
    # runs that transaction again on a fresh connection (`_pg_transaction`).
    return create_async_engine(url, echo=echo, pool_size=10, max_overflow=10)


def _sync_sqlite(engine: AsyncEngine, busy_ms: int) -> Engine:
    """A synchronous engine on the same SQLite file as `engine`."""
    url = engine.url.set(drivername="sqlite")
    # One connection, always the same: our transactions take turns anyway, and a connection
    # keeps its page cache warm only while no other connection writes.
    sync = create_engine(
        url,
        echo=engine.echo,
        connect_args={"timeout": busy_ms / 1000},
        poolclass=StaticPool,
    )
    event.listen(sync, "connect", _pragmas(busy_ms))
    return sync


def _locked(exc: OperationalError) -> bool:
    return "locked" in str(exc.orig) or "busy" in str(exc.orig)


def _run(row: Any) -> Run:
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


def _age(run: Run) -> tuple[datetime, str]:
    return (run.created_at, run.id)


def _item(row: Any) -> Item:
    return Item(
        id=row.id,
        run_id=row.run_id,
        skill=row.skill,
        box=Box(row.box),
        kind=ItemKind(row.kind),
        status=ItemStatus(row.status),
        title=row.title,
        body=row.body,
        created_at=row.created_at,
        call_id=row.call_id,
        tool=row.tool,
        args=row.args,
        schema=row.schema,
        risk=Risk(**(row.risk or {})),
        decided_by=row.decided_by,
        decided_via=row.decided_via,
        decided_at=row.decided_at,
        final_args=row.final_args,
        reason=row.reason,
        read_at=row.read_at,
        secret=row.secret,
    )


def _delivery(row: Any) -> Delivery:
    return Delivery(
        id=row.id,
        item_id=row.item_id,
        run_id=row.run_id,
        channel=row.channel,
        address=row.address,
        status=DeliveryStatus(row.status),
        attempts=row.attempts,
        ref=row.ref,
        last_error=row.last_error,
        needs_update=row.needs_update,
        next_attempt_at=row.next_attempt_at,
        created_at=row.created_at,
    )


def _event(row: Any) -> Event:
    return load_event(
        run_id=row.run_id,
        seq=row.seq,
        kind=row.kind,
        data=row.data,
        at=row.at,
        version=row.version,
    )


async def _pg_transaction(
    engine: AsyncEngine, fn: Callable[[Connection], T], *, retry: bool = True
) -> T:
    """Run `fn` as one PostgreSQL transaction; once more on a fresh connection if its
    connection turned out to be dead before COMMIT was sent. Nothing of it was applied then
    (the server rolls back a transaction whose connection is gone), so running it again is
    safe. A connection lost during COMMIT leaves the outcome unknown: that error goes to the
    caller."""
    committing = False
    try:
        async with engine.begin() as conn:
            result = await conn.run_sync(fn)
            committing = True
        return result
    except DBAPIError as exc:
        if not retry or committing or not exc.connection_invalidated:
            raise
        log.info("a pooled PostgreSQL connection was dead (%s); retrying", type(exc.orig).__name__)
    return await _pg_transaction(engine, fn, retry=False)


async def _alive(session: AsyncSession) -> None:
    """Begin `session`'s transaction on a live connection: the caller's block cannot be run
    again, so a dead pooled connection is found (and replaced) before it starts."""
    try:
        await session.execute(_PING)
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
        await session.rollback()  # lets the dead connection go; the next statement gets another
        await session.execute(_PING)


def _transaction(engine: Engine, fn: Callable[[Connection], T]) -> T:
    with engine.begin() as c:
        return fn(c)


class SqlStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_postgres = engine.dialect.name == "postgresql"
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        # SQLite allows one writer: queue our own transactions rather than fight over the lock.
        self._lock: asyncio.Lock | None = None if self.is_postgres else asyncio.Lock()
        # SQLite: transactions run on the loop (`_inline`) and wait out another process's
        # write on the store's thread (`_waiting`); see the module docstring.
        self._inline: Engine | None = None
        self._waiting: Engine | None = None
        self._thread: ThreadPoolExecutor | None = None
        if not self.is_postgres:
            self._inline = _sync_sqlite(engine, _BUSY_INLINE_MS)
            self._waiting = _sync_sqlite(engine, _BUSY_WAIT_MS)
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="pizzabot-sqlite")

    async def _do(self, fn: Callable[[Session], T]) -> T:
        """Run `fn` with an ORM session as one transaction: committed when it returns,
        rolled back if it raises."""

        def in_session(c: Connection) -> T:
            with Session(bind=c, expire_on_commit=False) as session:
                result = fn(session)
                session.flush()  # the connection's transaction commits it
                return result

        return await self._do_core(in_session)

    async def _do_core(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn` with a plain connection as one transaction (no ORM session to build)."""
        if self.is_postgres:
            return await _pg_transaction(self.engine, fn)
        return await self._sqlite(fn)

    async def _sqlite(self, fn: Callable[[Connection], T]) -> T:
        assert self._lock is not None and self._inline is not None
        async with self._lock:
            try:
                return _transaction(self._inline, fn)
            except OperationalError as exc:
                if not _locked(exc):
                    raise
            # Another process is writing: wait for it off the loop, then try again.
            assert self._thread is not None and self._waiting is not None
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._thread, _transaction, self._waiting, fn)

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncSession]:
        """An async session in a transaction, for code outside this class (`store.triggers`)."""
        lock = self._lock
        if lock is not None:
            await lock.acquire()
        try:
            async with self._sessions() as session:
                if self.is_postgres:
                    await _alive(session)
                yield session
                await session.commit()  # not reached if the block raised: closing rolls back
        finally:
            if lock is not None:
                lock.release()

    def _runnable(self, c: Connection, run_id: str) -> None:
        """Tell every listening worker (any process) that a run can be claimed; PostgreSQL
        delivers it when this transaction commits, and never if it rolls back."""
        if self.is_postgres:
            c.execute(text("SELECT pg_notify(:c, :id)"), {"c": "pizzabot_runs", "id": run_id})

    # -- runs ----------------------------------------------------------------------------

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
        if idempotency_key is not None:
            existing = await self._by_idempotency(idempotency_key)
            if existing is not None:
                return existing

        def tx(s: Session) -> Run:
            row = RunRow(
                id=run_id,
                skill=skill,
                status=RunStatus.QUEUED.value,
                input=input,
                trigger=trigger,
                created_at=now,
                updated_at=now,
                tokens=0,
                cost_usd=0.0,
                steps=0,
                cost_known=True,
                budget_extra={},
                idempotency_key=idempotency_key,
                last_seq=0,
            )
            s.add(row)
            s.flush()
            c = s.connection()
            self._append(c, run_id, events, now)
            self._runnable(c, run_id)
            return _run(row)

        try:
            return await self._do(tx)
        except IntegrityError:
            if idempotency_key is None:
                raise
            existing = await self._by_idempotency(idempotency_key)
            if existing is None:
                raise
            return existing

    async def _by_idempotency(self, key: str) -> Run | None:
        def tx(c: Connection) -> Run | None:
            row = c.execute(select(RUNS).where(RUNS.c.idempotency_key == key)).first()
            return _run(row) if row else None

        return await self._do_core(tx)

    async def get_run(self, run_id: str) -> Run:
        def tx(c: Connection) -> Run:
            row = c.execute(_SELECT_RUN, {"run_id": run_id}).first()
            if row is None:
                raise NotFound(f"no run {run_id}")
            return _run(row)

        return await self._do_core(tx)

    async def list_runs(self, *, limit: int = 100, status: RunStatus | None = None) -> list[Run]:
        def tx(c: Connection) -> list[Run]:
            q = select(RUNS).order_by(RUNS.c.created_at.desc()).limit(limit)
            if status is not None:
                q = q.where(RUNS.c.status == status.value)
            return [_run(r) for r in c.execute(q)]

        return await self._do_core(tx)

    async def runs_with_status(self, status: RunStatus) -> list[str]:
        def tx(c: Connection) -> list[str]:
            q = select(RUNS.c.id).where(RUNS.c.status == status.value)
            return list(c.execute(q).scalars())

        return await self._do_core(tx)

    async def release_leases(self, *, now: datetime) -> int:
        """Expire every lease now: for a single-process server (SQLite) at start, whose old
        leases can only belong to a process that died."""

        def tx(c: Connection) -> int:
            result = c.execute(
                update(RUNS).where(RUNS.c.status == _RUNNING).values(lease_expires_at=now)
            )
            return int(result.rowcount)

        return await self._do_core(tx)

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

        return await self._do_core(tx)

    async def claim_runs(
        self, *, worker: str, now: datetime, lease_seconds: float, limit: int
    ) -> list[Claimed]:
        claim = _CLAIM[self.is_postgres]
        params = {
            "now": now,
            "worker": worker,
            "expires": now + timedelta(seconds=lease_seconds),
            "n": limit,
        }

        def tx(c: Connection) -> list[Claimed]:
            # Read in the same transaction as the claim: once the switch is seen on, no run is
            # taken, and no separate round trip is paid for it on every wake-up.
            kill = c.execute(_SELECT_KILL).scalar_one_or_none()
            if kill and kill.get("on"):
                return []
            # RETURNING gives no order; oldest first, as they were picked.
            runs = sorted((_run(row) for row in c.execute(claim, params)), key=_age)
            return [
                Claimed(run, [_event(r) for r in c.execute(_SELECT_EVENTS, {"run_id": run.id})])
                for run in runs
            ]

        return await self._do_core(tx)

    async def claim_run(self, *, worker: str, now: datetime, lease_seconds: float) -> Run | None:
        claimed = await self.claim_runs(
            worker=worker, now=now, lease_seconds=lease_seconds, limit=1
        )
        return claimed[0].run if claimed else None

    async def renew_lease(
        self, run_id: str, *, worker: str, now: datetime, lease_seconds: float
    ) -> Run:
        params = {
            "run_id": run_id,
            "worker": worker,
            "expires": now + timedelta(seconds=lease_seconds),
        }

        def tx(c: Connection) -> Run:
            row = c.execute(_RENEW, params).first()
            if row is None:
                raise LeaseLost(run_id)
            return _run(row)

        return await self._do_core(tx)

    async def set_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        worker: str | None,
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
                worker=worker,
                now=now,
                result=result,
                error=error,
                usage=usage,
                killed_by=killed_by,
            )

        return await self._do(tx)

    def _set_status(
        self,
        s: Session,
        run_id: str,
        status: RunStatus,
        *,
        worker: str | None,
        now: datetime,
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        killed_by: str | None = None,
    ) -> Run:
        q = select(RunRow).where(RunRow.id == run_id)
        if self.is_postgres:
            q = q.with_for_update()
        row = s.execute(q).scalar_one_or_none()
        if row is None:
            raise NotFound(f"no run {run_id}")
        if worker is not None and (row.lease_owner != worker or row.status != _RUNNING):
            raise LeaseLost(run_id)
        current = RunStatus(row.status)
        if current is not status:
            transition(current, status)
        row.status = status.value
        row.updated_at = now
        if status is not RunStatus.RUNNING:
            row.lease_owner = None
            row.lease_expires_at = None
        if status.terminal:
            row.finished_at = now
        if result is not None:
            row.result = result
        if error is not None:
            row.error = error
        if killed_by is not None:
            row.killed_by = killed_by
        if usage is not None:
            row.tokens, row.cost_usd, row.steps, row.cost_known = (
                usage.tokens,
                usage.cost_usd,
                usage.steps,
                usage.cost_known,
            )
        return _run(row)

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
            self._append(c, run_id, events, now)
            self._runnable(c, run_id)
            return _run(row)

        return await self._do(tx)

    async def add_budget(
        self,
        run_id: str,
        extra: dict[str, float],
        *,
        worker: str | None,
        now: datetime,
        event: NewEvent,
    ) -> list[Event]:
        def tx(s: Session) -> list[Event]:
            appended = self._append(s.connection(), run_id, [event], now, worker=worker)
            row = s.get(RunRow, run_id)
            if row is None:
                raise NotFound(f"no run {run_id}")
            merged = dict(row.budget_extra or {})
            for k, v in extra.items():
                merged[k] = merged.get(k, 0) + v
            row.budget_extra = merged
            return appended

        return await self._do(tx)

    # -- events --------------------------------------------------------------------------

    def _append(
        self,
        c: Connection,
        run_id: str,
        events: Sequence[NewEvent],
        now: datetime,
        *,
        worker: str | None = None,
        usage: Usage | None = None,
    ) -> list[Event]:
        """Number and insert `events`. The UPDATE that takes the numbers also checks the lease
        (`worker`) and records `usage`: one statement, and on PostgreSQL it locks the run's
        row, so concurrent appends to one run are numbered one after the other."""
        if not events and worker is None and usage is None:
            return []
        params: dict[str, Any] = {"run_id": run_id, "n": len(events), "worker": worker}
        if usage is not None:
            params.update(
                u_tokens=usage.tokens,
                u_cost=usage.cost_usd,
                u_steps=usage.steps,
                u_known=usage.cost_known,
                now=now,
            )
        last = c.execute(_BUMP[(worker is not None, usage is not None)], params).scalar()
        if last is None:
            if worker is not None:
                raise LeaseLost(run_id)
            raise NotFound(f"no run {run_id}")
        first = int(last) - len(events) + 1
        appended = [
            Event(
                run_id=run_id,
                seq=first + i,
                payload=ev.payload,
                at=now,
                version=EVENT_SCHEMA_VERSION,
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

    async def append_events(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        *,
        worker: str | None,
        now: datetime,
        usage: Usage | None = None,
    ) -> list[Event]:
        def tx(c: Connection) -> list[Event]:
            return self._append(c, run_id, events, now, worker=worker, usage=usage)

        return await self._do_core(tx)

    async def events(self, run_id: str) -> list[Event]:
        def tx(c: Connection) -> list[Event]:
            return [_event(r) for r in c.execute(_SELECT_EVENTS, {"run_id": run_id})]

        return await self._do_core(tx)

    # -- inbox ---------------------------------------------------------------------------

    async def create_item(
        self,
        item: Item,
        *,
        targets: Sequence[Target],
        worker: str | None,
        now: datetime,
        run_status: RunStatus | None = None,
        events: Sequence[NewEvent] = (),
    ) -> Item:
        def tx(s: Session) -> Item:
            run = s.get(RunRow, item.run_id)
            if run is None:
                raise NotFound(f"no run {item.run_id}")
            if worker is not None and (run.lease_owner != worker or run.status != _RUNNING):
                raise LeaseLost(item.run_id)
            self._insert_item(s, item, targets, now)
            self._append(s.connection(), item.run_id, events, now)
            if run_status is not None:
                transition(RunStatus(run.status), run_status)
                run.status = run_status.value
                run.updated_at = now
                if run_status is not RunStatus.RUNNING:
                    run.lease_owner = None
                    run.lease_expires_at = None
            return item

        return await self._do(tx)

    def _insert_item(
        self, s: Session, item: Item, targets: Sequence[Target], now: datetime
    ) -> None:
        s.add(
            ItemRow(
                id=item.id,
                run_id=item.run_id,
                skill=item.skill,
                box=item.box.value,
                kind=item.kind.value,
                status=item.status.value,
                title=item.title,
                body=item.body,
                created_at=item.created_at,
                call_id=item.call_id,
                tool=item.tool,
                args=item.args,
                schema=item.schema,
                risk=item.risk.as_dict(),
                secret=item.secret,
            )
        )
        s.flush()
        for t in targets:
            s.add(
                DeliveryRow(
                    id=new_id(),
                    item_id=item.id,
                    run_id=item.run_id,
                    channel=t.channel,
                    address=t.address,
                    status=DeliveryStatus.PENDING.value,
                    attempts=0,
                    needs_update=False,
                    created_at=now,
                    updated_at=now,
                )
            )

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        worker: str | None,
        now: datetime,
        events: Sequence[NewEvent],
        unread: Item,
        targets: Sequence[Target],
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        killed_by: str | None = None,
    ) -> Run:
        def tx(s: Session) -> Run:
            run = self._set_status(
                s,
                run_id,
                status,
                worker=worker,
                now=now,
                result=result,
                error=error,
                usage=usage,
                killed_by=killed_by,
            )
            s.flush()
            self._append(s.connection(), run_id, events, now)
            self._close_items(s, run_id, status=ItemStatus.CANCELLED, now=now)
            self._insert_item(s, unread, targets, now)
            return run

        return await self._do(tx)

    async def get_item(self, item_id: str) -> Item:
        def tx(c: Connection) -> Item:
            row = c.execute(_SELECT_ITEM, {"item_id": item_id}).first()
            if row is None:
                raise NotFound(f"no item {item_id}")
            return _item(row)

        return await self._do_core(tx)

    async def list_items(
        self,
        *,
        box: Box | None = None,
        status: ItemStatus | None = None,
        run_id: str | None = None,
        limit: int = 200,
    ) -> list[Item]:
        def tx(c: Connection) -> list[Item]:
            q = select(ITEMS).order_by(ITEMS.c.created_at.desc(), ITEMS.c.id.desc()).limit(limit)
            if box is not None:
                q = q.where(ITEMS.c.box == box.value)
            if status is not None:
                q = q.where(ITEMS.c.status == status.value)
            if run_id is not None:
                q = q.where(ITEMS.c.run_id == run_id)
            return [_item(r) for r in c.execute(q)]

        return await self._do_core(tx)

    async def record_decision(
        self,
        item_id: str,
        decision: Decision,
        *,
        actor: str,
        channel: str,
        now: datetime,
        final_args: dict[str, Any] | None,
        event: NewEvent,
        status: ItemStatus | None = None,
    ) -> Item:
        new_status = status or _DECIDED_STATUS[decision.kind]
        reason = getattr(decision, "reason", None) or None

        def tx(c: Connection) -> Item:
            # The first decision wins: only a pending item is updated.
            row = c.execute(
                _DECIDE,
                {
                    "item_id": item_id,
                    "now": now,
                    "d_status": new_status.value,
                    "d_actor": actor,
                    "d_via": channel,
                    "d_args": final_args,
                    "d_reason": reason,
                },
            ).first()
            if row is None:
                earlier = c.execute(_SELECT_ITEM, {"item_id": item_id}).first()
                if earlier is None:
                    raise NotFound(f"no item {item_id}")
                raise AlreadyDecided(_item(earlier))
            run_id = row.run_id
            self._append(c, run_id, [event], now)
            c.execute(_QUEUE_IF_WAITING, {"run_id": run_id, "now": now})
            self._runnable(c, run_id)
            c.execute(_COPIES_NEED_UPDATE, {"c_item": item_id, "now": now})
            c.execute(
                _INSERT_AUDIT,
                {
                    "at": now,
                    "action": "decision",
                    "actor": actor,
                    "channel": channel,
                    "run_id": run_id,
                    "item_id": item_id,
                    "detail": {
                        "decision": decision.kind,
                        "status": new_status.value,
                        "args_before": row.args,
                        "args_after": final_args,
                        "reason": reason,
                    },
                },
            )
            return _item(row)

        return await self._do_core(tx)

    async def close_items(self, run_id: str, *, status: ItemStatus, now: datetime) -> list[Item]:
        def tx(s: Session) -> list[Item]:
            return self._close_items(s, run_id, status=status, now=now)

        return await self._do(tx)

    def _close_items(
        self, s: Session, run_id: str, *, status: ItemStatus, now: datetime
    ) -> list[Item]:
        rows = list(
            s.execute(
                select(ItemRow).where(
                    ItemRow.run_id == run_id, ItemRow.status == ItemStatus.PENDING.value
                )
            ).scalars()
        )
        for row in rows:
            row.status = status.value
            row.decided_at = now
            row.decided_via = "engine"
            row.decided_by = "the run ended"
            s.execute(
                update(DeliveryRow)
                .where(
                    DeliveryRow.item_id == row.id,
                    DeliveryRow.status == DeliveryStatus.SENT.value,
                )
                .values(needs_update=True, next_attempt_at=None, updated_at=now)
            )
        return [_item(r) for r in rows]

    async def mark_read(self, item_id: str, *, now: datetime) -> Item:
        def tx(s: Session) -> Item:
            row = s.get(ItemRow, item_id)
            if row is None:
                raise NotFound(f"no item {item_id}")
            if row.box == Box.UNREAD.value and row.status == ItemStatus.UNREAD.value:
                row.status = ItemStatus.READ.value
                row.read_at = now
            return _item(row)

        return await self._do(tx)

    # -- outbox --------------------------------------------------------------------------

    async def due_deliveries(self, *, now: datetime, limit: int = 50) -> list[Delivery]:
        due = or_(DELIVERIES.c.next_attempt_at.is_(None), DELIVERIES.c.next_attempt_at <= now)
        q = (
            select(DELIVERIES)
            .where(
                or_(
                    and_(DELIVERIES.c.status == DeliveryStatus.PENDING.value, due),
                    and_(
                        DELIVERIES.c.status == DeliveryStatus.SENT.value,
                        DELIVERIES.c.needs_update.is_(True),
                        due,
                    ),
                )
            )
            .order_by(DELIVERIES.c.created_at)
            .limit(limit)
        )

        def tx(c: Connection) -> list[Delivery]:
            return [_delivery(r) for r in c.execute(q)]

        return await self._do_core(tx)

    async def delivery_sent(
        self, delivery_id: str, *, ref: dict[str, Any] | None, now: datetime
    ) -> None:
        def tx(s: Session) -> None:
            row = s.get(DeliveryRow, delivery_id)
            if row is None:
                raise NotFound(f"no delivery {delivery_id}")
            item = s.get(ItemRow, row.item_id)
            row.status = DeliveryStatus.SENT.value
            row.ref = ref
            row.external_id = str(ref.get("id")) if ref and ref.get("id") is not None else None
            row.attempts += 1
            row.last_error = None
            row.next_attempt_at = None
            # Decided while the first send was in flight: the copy needs the outcome too.
            row.needs_update = bool(
                item is not None
                and item.box == Box.ACTION.value
                and item.status != ItemStatus.PENDING.value
            )
            row.updated_at = now

        await self._do(tx)

    async def delivery_updated(self, delivery_id: str, *, now: datetime) -> None:
        def tx(c: Connection) -> None:
            c.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery_id)
                .values(needs_update=False, last_error=None, next_attempt_at=None, updated_at=now)
            )

        await self._do_core(tx)

    async def delivery_failed(
        self, delivery_id: str, *, error: str, retry_at: datetime | None, now: datetime
    ) -> None:
        def tx(s: Session) -> None:
            row = s.get(DeliveryRow, delivery_id)
            if row is None:
                raise NotFound(f"no delivery {delivery_id}")
            row.attempts += 1
            row.last_error = error
            row.next_attempt_at = retry_at
            row.updated_at = now
            if retry_at is None:
                if row.status == DeliveryStatus.PENDING.value:
                    row.status = DeliveryStatus.FAILED.value
                else:
                    row.needs_update = False

        await self._do(tx)

    async def deliveries(self, item_id: str) -> list[Delivery]:
        q = (
            select(DELIVERIES)
            .where(DELIVERIES.c.item_id == item_id)
            .order_by(DELIVERIES.c.created_at)
        )

        def tx(c: Connection) -> list[Delivery]:
            return [_delivery(r) for r in c.execute(q)]

        return await self._do_core(tx)

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]:
        q = (
            select(DELIVERIES)
            .where(DELIVERIES.c.run_id == run_id, DELIVERIES.c.channel == channel)
            .order_by(DELIVERIES.c.created_at)
        )

        def tx(c: Connection) -> list[Delivery]:
            return [_delivery(r) for r in c.execute(q)]

        return await self._do_core(tx)

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None:
        q = (
            select(DELIVERIES)
            .where(DELIVERIES.c.channel == channel, DELIVERIES.c.external_id == external_id)
            .limit(1)
        )

        def tx(c: Connection) -> Delivery | None:
            row = c.execute(q).first()
            return _delivery(row) if row else None

        return await self._do_core(tx)

    # -- control -------------------------------------------------------------------------

    async def get_kill(self) -> dict[str, Any] | None:
        def tx(c: Connection) -> dict[str, Any] | None:
            value = c.execute(_SELECT_KILL).scalar_one_or_none()
            return dict(value) if value and value.get("on") else None

        return await self._do_core(tx)

    async def set_kill(self, *, on: bool, actor: str, now: datetime) -> None:
        def tx(s: Session) -> None:
            row = s.get(SwitchRow, KILL)
            value = {"on": on, "by": actor, "at": now.isoformat()}
            if row is None:
                s.add(SwitchRow(name=KILL, value=value, updated_at=now))
            else:
                row.value = value
                row.updated_at = now

        await self._do(tx)

    async def audit(
        self,
        *,
        action: str,
        actor: str,
        channel: str,
        now: datetime,
        run_id: str | None = None,
        item_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        def tx(s: Session) -> None:
            s.add(
                AuditRow(
                    at=now,
                    action=action,
                    actor=actor,
                    channel=channel,
                    run_id=run_id,
                    item_id=item_id,
                    detail=detail or {},
                )
            )

        await self._do(tx)

    async def audit_log(self, *, limit: int = 200) -> list[AuditEntry]:
        def tx(s: Session) -> list[AuditEntry]:
            rows = s.execute(select(AuditRow).order_by(AuditRow.id.desc()).limit(limit)).scalars()
            return [
                AuditEntry(
                    id=r.id,
                    at=r.at,
                    action=r.action,
                    actor=r.actor,
                    channel=r.channel,
                    run_id=r.run_id,
                    item_id=r.item_id,
                    detail=r.detail,
                )
                for r in rows
            ]

        return await self._do(tx)

    async def aclose(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=True)
        for sync in (self._inline, self._waiting):
            if sync is not None:
                sync.dispose()
        await self.engine.dispose()
