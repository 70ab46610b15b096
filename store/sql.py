"""`SqlStore`: the engine's `Store` on SQLAlchemy 2 (async), for SQLite and PostgreSQL.

On PostgreSQL many workers in many processes share the database: a claim takes a row with
`FOR UPDATE SKIP LOCKED`, and every write that belongs to a run's owner checks the lease in
the same statement (fencing). SQLite has one writer at a time anyway, so this store
serialises its own transactions with a lock instead of meeting "database is locked".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, event, func, or_, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from agent.context import new_id
from agent.errors import AlreadyDecided, NotFound
from agent.model import (
    EVENT_SCHEMA_VERSION,
    AuditEntry,
    Box,
    Decision,
    Delivery,
    DeliveryStatus,
    Event,
    EventKind,
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
from agent.store import LeaseLost
from store.tables import AuditRow, DeliveryRow, EventRow, ItemRow, RunRow, SwitchRow

KILL = "kill"
_DECIDED_STATUS = {
    "approve": ItemStatus.APPROVED,
    "edit": ItemStatus.EDITED,
    "reject": ItemStatus.REJECTED,
}


def connect(url: str, *, echo: bool = False) -> AsyncEngine:
    """An engine for `url`; SQLite gets WAL and a busy timeout so a CLI and a server can share it."""
    if url.startswith("sqlite"):
        engine = create_async_engine(url, echo=echo, connect_args={"timeout": 30})

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_async_engine(url, echo=echo, pool_size=10, max_overflow=10, pool_pre_ping=True)


def _run(row: RunRow) -> Run:
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


def _item(row: ItemRow) -> Item:
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


def _delivery(row: DeliveryRow) -> Delivery:
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


def _event(row: EventRow) -> Event:
    return Event(
        run_id=row.run_id,
        seq=row.seq,
        kind=EventKind(row.kind),
        data=row.data,
        at=row.at,
        version=row.version,
    )


class SqlStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.is_postgres = engine.dialect.name == "postgresql"
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)
        # SQLite allows one writer: queue our own transactions rather than fight over the lock.
        self._lock: asyncio.Lock | None = None if self.is_postgres else asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncSession]:
        lock = self._lock
        if lock is not None:
            await lock.acquire()
        try:
            async with self._sessions() as session, session.begin():
                yield session
        finally:
            if lock is not None:
                lock.release()

    async def _runnable(self, s: AsyncSession, run_id: str) -> None:
        """Tell every listening worker (any process) that a run can be claimed; PostgreSQL
        delivers it when this transaction commits, and never if it rolls back."""
        if self.is_postgres:
            await s.execute(text("SELECT pg_notify(:c, :id)"), {"c": "pizzabot_runs", "id": run_id})

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
        try:
            async with self._tx() as s:
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
                )
                s.add(row)
                await s.flush()
                await self._append(s, run_id, events, now)
                await self._runnable(s, run_id)
                return _run(row)
        except IntegrityError:
            if idempotency_key is None:
                raise
            existing = await self._by_idempotency(idempotency_key)
            if existing is None:
                raise
            return existing

    async def _by_idempotency(self, key: str) -> Run | None:
        async with self._tx() as s:
            row = (
                await s.execute(select(RunRow).where(RunRow.idempotency_key == key))
            ).scalar_one_or_none()
            return _run(row) if row else None

    async def get_run(self, run_id: str) -> Run:
        async with self._tx() as s:
            row = await s.get(RunRow, run_id)
            if row is None:
                raise NotFound(f"no run {run_id}")
            return _run(row)

    async def list_runs(self, *, limit: int = 100, status: RunStatus | None = None) -> list[Run]:
        async with self._tx() as s:
            q = select(RunRow).order_by(RunRow.created_at.desc()).limit(limit)
            if status is not None:
                q = q.where(RunRow.status == status.value)
            return [_run(r) for r in (await s.execute(q)).scalars()]

    async def runs_with_status(self, status: RunStatus) -> list[str]:
        async with self._tx() as s:
            return list(
                (await s.execute(select(RunRow.id).where(RunRow.status == status.value))).scalars()
            )

    async def release_leases(self, *, now: datetime) -> int:
        """Expire every lease now: for a single-process server (SQLite) at start, whose old
        leases can only belong to a process that died."""
        async with self._tx() as s:
            result = await s.execute(
                update(RunRow)
                .where(RunRow.status == RunStatus.RUNNING.value)
                .values(lease_expires_at=now)
            )
            return int(result.rowcount)  # type: ignore[attr-defined]

    async def skill_usage_since(self, skill: str, since: datetime) -> Usage:
        async with self._tx() as s:
            row = (
                await s.execute(
                    select(
                        func.coalesce(func.sum(RunRow.tokens), 0),
                        func.coalesce(func.sum(RunRow.cost_usd), 0.0),
                        func.coalesce(func.sum(RunRow.steps), 0),
                    ).where(RunRow.skill == skill, RunRow.created_at >= since)
                )
            ).one()
            return Usage(tokens=int(row[0]), cost_usd=float(row[1]), steps=int(row[2]))

    def _claimable(self, now: datetime) -> Any:
        return or_(
            RunRow.status == RunStatus.QUEUED.value,
            and_(RunRow.status == RunStatus.RUNNING.value, RunRow.lease_expires_at < now),
        )

    async def claim_run(self, *, worker: str, now: datetime, lease_seconds: float) -> Run | None:
        async with self._tx() as s:
            q = select(RunRow.id).where(self._claimable(now)).order_by(RunRow.updated_at).limit(1)
            if self.is_postgres:
                q = q.with_for_update(skip_locked=True)
            run_id = (await s.execute(q)).scalar_one_or_none()
            if run_id is None:
                return None
            result = await s.execute(
                update(RunRow)
                .where(RunRow.id == run_id, self._claimable(now))
                .values(
                    status=RunStatus.RUNNING.value,
                    lease_owner=worker,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    updated_at=now,
                    started_at=func.coalesce(RunRow.started_at, now),
                )
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                return None
            row = await s.get(RunRow, run_id, populate_existing=True)
            assert row is not None
            return _run(row)

    async def renew_lease(
        self, run_id: str, *, worker: str, now: datetime, lease_seconds: float
    ) -> Run:
        async with self._tx() as s:
            result = await s.execute(
                update(RunRow)
                .where(
                    RunRow.id == run_id,
                    RunRow.lease_owner == worker,
                    RunRow.status == RunStatus.RUNNING.value,
                )
                .values(lease_expires_at=now + timedelta(seconds=lease_seconds))
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                raise LeaseLost(run_id)
            row = await s.get(RunRow, run_id, populate_existing=True)
            assert row is not None
            return _run(row)

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
        async with self._tx() as s:
            return await self._set_status(
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

    async def _set_status(
        self,
        s: AsyncSession,
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
        row = (await s.execute(q)).scalar_one_or_none()
        if row is None:
            raise NotFound(f"no run {run_id}")
        if worker is not None and (
            row.lease_owner != worker or row.status != RunStatus.RUNNING.value
        ):
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
        async with self._tx() as s:
            row = await s.get(RunRow, run_id)
            if row is None:
                raise NotFound(f"no run {run_id}")
            transition(RunStatus(row.status), RunStatus.QUEUED)
            row.status = RunStatus.QUEUED.value
            row.updated_at = now
            row.finished_at = None
            row.error = None
            await self._append(s, run_id, events, now)
            await self._runnable(s, run_id)
            return _run(row)

    async def add_budget(self, run_id: str, extra: dict[str, float]) -> None:
        async with self._tx() as s:
            row = await s.get(RunRow, run_id)
            if row is None:
                raise NotFound(f"no run {run_id}")
            merged = dict(row.budget_extra or {})
            for k, v in extra.items():
                merged[k] = merged.get(k, 0) + v
            row.budget_extra = merged

    # -- events --------------------------------------------------------------------------

    async def _append(
        self, s: AsyncSession, run_id: str, events: Sequence[NewEvent], now: datetime
    ) -> list[Event]:
        if not events:
            return []
        last = (
            await s.execute(select(func.max(EventRow.seq)).where(EventRow.run_id == run_id))
        ).scalar()
        seq = (last or 0) + 1
        rows = []
        for i, ev in enumerate(events):
            rows.append(
                EventRow(
                    run_id=run_id,
                    seq=seq + i,
                    kind=ev.kind.value,
                    data=ev.data,
                    at=now,
                    version=EVENT_SCHEMA_VERSION,
                )
            )
        s.add_all(rows)
        await s.flush()
        return [_event(r) for r in rows]

    async def append_events(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        *,
        worker: str | None,
        now: datetime,
        usage: Usage | None = None,
    ) -> list[Event]:
        for attempt in range(5):
            try:
                async with self._tx() as s:
                    if worker is not None:
                        owner = (
                            await s.execute(
                                select(RunRow.lease_owner, RunRow.status).where(RunRow.id == run_id)
                            )
                        ).one_or_none()
                        if (
                            owner is None
                            or owner[0] != worker
                            or owner[1] != RunStatus.RUNNING.value
                        ):
                            raise LeaseLost(run_id)
                    if usage is not None:
                        await s.execute(
                            update(RunRow)
                            .where(RunRow.id == run_id)
                            .values(
                                tokens=usage.tokens,
                                cost_usd=usage.cost_usd,
                                steps=usage.steps,
                                cost_known=usage.cost_known,
                                updated_at=now,
                            )
                        )
                    return await self._append(s, run_id, events, now)
            except IntegrityError:
                # Two writers took the same sequence number; the loser tries again.
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    async def events(self, run_id: str) -> list[Event]:
        async with self._tx() as s:
            rows = (
                await s.execute(
                    select(EventRow).where(EventRow.run_id == run_id).order_by(EventRow.seq)
                )
            ).scalars()
            return [_event(r) for r in rows]

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
        async with self._tx() as s:
            run = await s.get(RunRow, item.run_id)
            if run is None:
                raise NotFound(f"no run {item.run_id}")
            if worker is not None and (
                run.lease_owner != worker or run.status != RunStatus.RUNNING.value
            ):
                raise LeaseLost(item.run_id)
            await self._insert_item(s, item, targets, now)
            await self._append(s, item.run_id, events, now)
            if run_status is not None:
                transition(RunStatus(run.status), run_status)
                run.status = run_status.value
                run.updated_at = now
                if run_status is not RunStatus.RUNNING:
                    run.lease_owner = None
                    run.lease_expires_at = None
            return item

    async def _insert_item(
        self, s: AsyncSession, item: Item, targets: Sequence[Target], now: datetime
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
        await s.flush()
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
        event: NewEvent,
        note: Item,
        targets: Sequence[Target],
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        killed_by: str | None = None,
    ) -> Run:
        async with self._tx() as s:
            run = await self._set_status(
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
            await self._append(s, run_id, [event], now)
            await self._close_items(s, run_id, status=ItemStatus.CANCELLED, now=now)
            await self._insert_item(s, note, targets, now)
            return run

    async def get_item(self, item_id: str) -> Item:
        async with self._tx() as s:
            row = await s.get(ItemRow, item_id)
            if row is None:
                raise NotFound(f"no item {item_id}")
            return _item(row)

    async def list_items(
        self,
        *,
        box: Box | None = None,
        status: ItemStatus | None = None,
        run_id: str | None = None,
        limit: int = 200,
    ) -> list[Item]:
        async with self._tx() as s:
            q = select(ItemRow).order_by(ItemRow.created_at.desc(), ItemRow.id.desc()).limit(limit)
            if box is not None:
                q = q.where(ItemRow.box == box.value)
            if status is not None:
                q = q.where(ItemRow.status == status.value)
            if run_id is not None:
                q = q.where(ItemRow.run_id == run_id)
            return [_item(r) for r in (await s.execute(q)).scalars()]

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
        async with self._tx() as s:
            result = await s.execute(
                update(ItemRow)
                .where(ItemRow.id == item_id, ItemRow.status == ItemStatus.PENDING.value)
                .values(
                    status=new_status.value,
                    decided_by=actor,
                    decided_via=channel,
                    decided_at=now,
                    final_args=final_args,
                    reason=reason,
                )
            )
            row = await s.get(ItemRow, item_id, populate_existing=True)
            if row is None:
                raise NotFound(f"no item {item_id}")
            if result.rowcount != 1:  # type: ignore[attr-defined]
                raise AlreadyDecided(_item(row))
            await self._append(s, row.run_id, [event], now)
            await s.execute(
                update(RunRow)
                .where(RunRow.id == row.run_id, RunRow.status == RunStatus.WAITING.value)
                .values(status=RunStatus.QUEUED.value, updated_at=now)
            )
            await self._runnable(s, row.run_id)
            await s.execute(
                update(DeliveryRow)
                .where(
                    DeliveryRow.item_id == item_id, DeliveryRow.status == DeliveryStatus.SENT.value
                )
                .values(needs_update=True, next_attempt_at=None, updated_at=now)
            )
            s.add(
                AuditRow(
                    at=now,
                    action="decision",
                    actor=actor,
                    channel=channel,
                    run_id=row.run_id,
                    item_id=item_id,
                    detail={
                        "decision": decision.kind,
                        "status": new_status.value,
                        "args_before": row.args,
                        "args_after": final_args,
                        "reason": reason,
                    },
                )
            )
            return _item(row)

    async def close_items(self, run_id: str, *, status: ItemStatus, now: datetime) -> list[Item]:
        async with self._tx() as s:
            return await self._close_items(s, run_id, status=status, now=now)

    async def _close_items(
        self, s: AsyncSession, run_id: str, *, status: ItemStatus, now: datetime
    ) -> list[Item]:
        rows = list(
            (
                await s.execute(
                    select(ItemRow).where(
                        ItemRow.run_id == run_id, ItemRow.status == ItemStatus.PENDING.value
                    )
                )
            ).scalars()
        )
        for row in rows:
            row.status = status.value
            row.decided_at = now
            row.decided_via = "engine"
            row.decided_by = "the run ended"
            await s.execute(
                update(DeliveryRow)
                .where(
                    DeliveryRow.item_id == row.id,
                    DeliveryRow.status == DeliveryStatus.SENT.value,
                )
                .values(needs_update=True, next_attempt_at=None, updated_at=now)
            )
        return [_item(r) for r in rows]

    async def mark_read(self, item_id: str, *, now: datetime) -> Item:
        async with self._tx() as s:
            row = await s.get(ItemRow, item_id)
            if row is None:
                raise NotFound(f"no item {item_id}")
            if row.box == Box.UNREAD.value and row.status == ItemStatus.UNREAD.value:
                row.status = ItemStatus.READ.value
                row.read_at = now
            return _item(row)

    # -- outbox --------------------------------------------------------------------------

    async def due_deliveries(self, *, now: datetime, limit: int = 50) -> list[Delivery]:
        due = or_(DeliveryRow.next_attempt_at.is_(None), DeliveryRow.next_attempt_at <= now)
        async with self._tx() as s:
            q = (
                select(DeliveryRow)
                .where(
                    or_(
                        and_(DeliveryRow.status == DeliveryStatus.PENDING.value, due),
                        and_(
                            DeliveryRow.status == DeliveryStatus.SENT.value,
                            DeliveryRow.needs_update.is_(True),
                            due,
                        ),
                    )
                )
                .order_by(DeliveryRow.created_at)
                .limit(limit)
            )
            return [_delivery(r) for r in (await s.execute(q)).scalars()]

    async def delivery_sent(
        self, delivery_id: str, *, ref: dict[str, Any] | None, now: datetime
    ) -> None:
        async with self._tx() as s:
            row = await s.get(DeliveryRow, delivery_id)
            if row is None:
                raise NotFound(f"no delivery {delivery_id}")
            item = await s.get(ItemRow, row.item_id)
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

    async def delivery_updated(self, delivery_id: str, *, now: datetime) -> None:
        async with self._tx() as s:
            await s.execute(
                update(DeliveryRow)
                .where(DeliveryRow.id == delivery_id)
                .values(needs_update=False, last_error=None, next_attempt_at=None, updated_at=now)
            )

    async def delivery_failed(
        self, delivery_id: str, *, error: str, retry_at: datetime | None, now: datetime
    ) -> None:
        async with self._tx() as s:
            row = await s.get(DeliveryRow, delivery_id)
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

    async def deliveries(self, item_id: str) -> list[Delivery]:
        async with self._tx() as s:
            q = (
                select(DeliveryRow)
                .where(DeliveryRow.item_id == item_id)
                .order_by(DeliveryRow.created_at)
            )
            return [_delivery(r) for r in (await s.execute(q)).scalars()]

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]:
        async with self._tx() as s:
            q = (
                select(DeliveryRow)
                .where(DeliveryRow.run_id == run_id, DeliveryRow.channel == channel)
                .order_by(DeliveryRow.created_at)
            )
            return [_delivery(r) for r in (await s.execute(q)).scalars()]

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None:
        async with self._tx() as s:
            row = (
                await s.execute(
                    select(DeliveryRow)
                    .where(DeliveryRow.channel == channel, DeliveryRow.external_id == external_id)
                    .limit(1)
                )
            ).scalar_one_or_none()
            return _delivery(row) if row else None

    # -- control -------------------------------------------------------------------------

    async def get_kill(self) -> dict[str, Any] | None:
        async with self._tx() as s:
            row = await s.get(SwitchRow, KILL)
            return dict(row.value) if row is not None and row.value.get("on") else None

    async def set_kill(self, *, on: bool, actor: str, now: datetime) -> None:
        async with self._tx() as s:
            row = await s.get(SwitchRow, KILL)
            value = {"on": on, "by": actor, "at": now.isoformat()}
            if row is None:
                s.add(SwitchRow(name=KILL, value=value, updated_at=now))
            else:
                row.value = value
                row.updated_at = now

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
        async with self._tx() as s:
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

    async def audit_log(self, *, limit: int = 200) -> list[AuditEntry]:
        async with self._tx() as s:
            rows = (
                await s.execute(select(AuditRow).order_by(AuditRow.id.desc()).limit(limit))
            ).scalars()
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

    async def aclose(self) -> None:
        await self.engine.dispose()
