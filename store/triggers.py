"""SQL for the triggers: schedules, their fires, the one-time timers of inbox items, and the
webhook signatures already accepted.

Every "at most once" here is an insert that a unique constraint turns into a no-op the second
time (`INSERT … ON CONFLICT DO NOTHING`): one fire per (schedule, fire time), one reminder and
one escalation per item, one accepted request per webhook signature. That holds across
restarts and across servers sharing PostgreSQL, with no lock held between them. It runs its
transactions through the run store's `Database` (on SQLite, behind the same writer lock), and
an item's reminder writes its deliveries and its run's event with the outbox's and the event
log's own functions. Implements `pizzabot.agent.schedules.ScheduleStore` and `HookSignatures`, and
`pizzabot.agent.store.ItemTimers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import NewEvent
from pizzabot.agent.model import Box, ItemStatus, Risk, Target
from pizzabot.agent.schedules import FireOutcome, FireRecord, ScheduleRecord
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import orm
from pizzabot.store.events import append_events
from pizzabot.store.outbox import copies_need_update, insert_deliveries
from pizzabot.store.sql import SqlStore
from pizzabot.store.tables import ItemRow
from pizzabot.store.tables_triggers import (
    HookSignatureRow,
    ItemTimerRow,
    ScheduleFireRow,
    ScheduleRow,
)


def _schedule(row: ScheduleRow) -> ScheduleRecord:
    return ScheduleRecord(
        id=row.id,
        skill=row.skill,
        source=row.source,
        cron=row.cron,
        every_seconds=row.every_seconds,
        input=row.input,
        timezone=row.timezone,
        misfire=row.misfire,
        paused=row.paused,
        created_at=row.created_at,
        updated_at=row.updated_at,
        active_since=row.active_since,
    )


def _fire(row: ScheduleFireRow) -> FireRecord:
    return FireRecord(
        schedule_id=row.schedule_id,
        fire_time=row.fire_time,
        status=row.status,
        run_id=row.run_id,
        detail=row.detail,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


class TriggerStore:
    def __init__(self, store: SqlStore) -> None:
        self.db = store.db

    # -- schedules -----------------------------------------------------------------------

    async def sync_skill_schedules(self, wanted: Sequence[ScheduleRecord]) -> None:
        """Make the schedules that come from skill files exactly `wanted`.

        A skill schedule's id is a digest of its definition, so an unchanged schedule keeps its
        row (and its pause) and an edited one is a new schedule. Concurrent servers insert the
        same rows; the second insert does nothing.
        """

        def tx(s: Session) -> None:
            for rec in wanted:
                s.execute(
                    self.db.insert(ScheduleRow)
                    .values(**_values(rec))
                    .on_conflict_do_nothing(index_elements=["id"])
                )
            s.execute(
                delete(ScheduleRow).where(
                    ScheduleRow.source == "skill", ScheduleRow.id.not_in([r.id for r in wanted])
                )
            )

        await self.db.run(orm(tx))

    async def add_schedule(self, rec: ScheduleRecord) -> ScheduleRecord:
        def tx(s: Session) -> None:
            s.add(ScheduleRow(**_values(rec)))

        await self.db.run(orm(tx))
        return rec

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        def tx(s: Session) -> ScheduleRecord:
            return _schedule(_get_schedule(s, schedule_id))

        return await self.db.run(orm(tx))

    async def list_schedules(self) -> list[ScheduleRecord]:
        def tx(s: Session) -> list[ScheduleRecord]:
            q = select(ScheduleRow).order_by(ScheduleRow.skill, ScheduleRow.created_at)
            return [_schedule(r) for r in s.execute(q).scalars()]

        return await self.db.run(orm(tx))

    async def set_paused(self, schedule_id: str, *, paused: bool, now: datetime) -> ScheduleRecord:
        def tx(s: Session) -> ScheduleRecord:
            row = _get_schedule(s, schedule_id)
            if row.paused != paused:
                row.paused = paused
                row.updated_at = now
                if not paused:
                    # Fire times that passed while paused were not missed: they were paused.
                    row.active_since = now
            return _schedule(row)

        return await self.db.run(orm(tx))

    async def delete_schedule(self, schedule_id: str) -> None:
        def tx(s: Session) -> None:
            result: Any = s.execute(delete(ScheduleRow).where(ScheduleRow.id == schedule_id))
            if result.rowcount != 1:
                raise NotFound(f"no schedule {schedule_id}")

        await self.db.run(orm(tx))

    # -- fires ---------------------------------------------------------------------------

    async def fire_once(
        self,
        schedule_id: str,
        fire_time: datetime,
        *,
        now: datetime,
        status: str = "claimed",
        detail: str | None = None,
    ) -> FireOutcome:
        """Record one fire of an active schedule; "duplicate" when that fire exists already."""
        fire = self.db.insert(ScheduleFireRow).values(
            schedule_id=schedule_id,
            fire_time=fire_time,
            status=status,
            run_id=None,
            detail=detail,
            created_at=now,
            updated_at=now,
        )
        fire = fire.on_conflict_do_nothing(index_elements=["schedule_id", "fire_time"])

        def tx(s: Session) -> FireOutcome:
            q = select(ScheduleRow.paused).where(ScheduleRow.id == schedule_id)
            if self.db.is_postgres:
                q = q.with_for_update(read=True)  # a concurrent pause or delete waits for us
            paused = s.execute(q).scalar_one_or_none()
            if paused is None:
                return "missing"
            if paused:
                return "paused"
            result: Any = s.execute(fire)
            return "claimed" if result.rowcount == 1 else "duplicate"

        return await self.db.run(orm(tx))

    async def finish_fire(
        self,
        schedule_id: str,
        fire_time: datetime,
        *,
        status: str,
        now: datetime,
        run_id: str | None = None,
        detail: str | None = None,
    ) -> None:
        def tx(s: Session) -> None:
            s.execute(
                update(ScheduleFireRow)
                .where(
                    ScheduleFireRow.schedule_id == schedule_id,
                    ScheduleFireRow.fire_time == fire_time,
                )
                .values(status=status, run_id=run_id, detail=detail, updated_at=now)
            )

        await self.db.run(orm(tx))

    async def last_fires(self) -> dict[str, FireRecord]:
        """The latest fire of every schedule that has fired."""
        latest = (
            select(ScheduleFireRow.schedule_id, func.max(ScheduleFireRow.fire_time).label("t"))
            .group_by(ScheduleFireRow.schedule_id)
            .subquery()
        )
        q = select(ScheduleFireRow).join(
            latest,
            (ScheduleFireRow.schedule_id == latest.c.schedule_id)
            & (ScheduleFireRow.fire_time == latest.c.t),
        )
        return {f.schedule_id: f for f in await self._fires(q)}

    async def fires(self, schedule_id: str, *, limit: int = 20) -> list[FireRecord]:
        q = (
            select(ScheduleFireRow)
            .where(ScheduleFireRow.schedule_id == schedule_id)
            .order_by(ScheduleFireRow.fire_time.desc())
            .limit(limit)
        )
        return await self._fires(q)

    async def unfinished_fires(self, *, before: datetime) -> list[FireRecord]:
        """Fires claimed before `before` whose run was never recorded (the process died)."""
        q = select(ScheduleFireRow).where(
            ScheduleFireRow.status == "claimed", ScheduleFireRow.created_at < before
        )
        return await self._fires(q)

    async def _fires(self, q: Any) -> list[FireRecord]:
        def tx(s: Session) -> list[FireRecord]:
            return [_fire(r) for r in s.execute(q).scalars()]

        return await self.db.run(orm(tx))

    # -- webhook signatures --------------------------------------------------------------

    async def accept_signature(
        self, signature: str, *, hook: str, expires_at: datetime, now: datetime
    ) -> bool:
        """Record a webhook signature as used; False when it was used before (a replay).

        Signatures whose `expires_at` has passed are pruned on the way: their timestamps are
        refused as stale anyway."""
        accept = (
            self.db.insert(HookSignatureRow)
            .values(signature=signature, hook=hook, expires_at=expires_at)
            .on_conflict_do_nothing(index_elements=["signature"])
        )

        def tx(s: Session) -> bool:
            s.execute(delete(HookSignatureRow).where(HookSignatureRow.expires_at < now))
            result: Any = s.execute(accept)
            return bool(result.rowcount == 1)

        return await self.db.run(orm(tx))

    async def forget_signature(self, signature: str) -> None:
        """Let a signature be used again: its request was refused after it was recorded."""

        def tx(s: Session) -> None:
            s.execute(delete(HookSignatureRow).where(HookSignatureRow.signature == signature))

        await self.db.run(orm(tx))

    # -- item timers ---------------------------------------------------------------------

    async def timers_done(self, item_ids: Sequence[str]) -> set[tuple[str, str]]:
        """(item id, kind) of the reminders and escalations already made."""
        if not item_ids:
            return set()
        q = select(ItemTimerRow.item_id, ItemTimerRow.kind).where(
            ItemTimerRow.item_id.in_(list(item_ids))
        )

        def tx(s: Session) -> set[tuple[str, str]]:
            return {(r[0], r[1]) for r in s.execute(q).all()}

        return await self.db.run(orm(tx))

    async def add_deliveries_once(
        self,
        item_id: str,
        *,
        kind: str,
        targets: Sequence[Target],
        note: NewEvent,
        now: datetime,
        shown: str | None = None,
        audit: tuple[str, dict[str, Any]] | None = None,
    ) -> bool:
        """New deliveries (the outbox sends them) for an item that is still pending, plus a note
        on its run, once per (item, kind); the step on the card (`shown`) and in the audit
        trail. False when already done or no longer pending."""
        once = (
            self.db.insert(ItemTimerRow)
            .values(item_id=item_id, kind=kind, at=now)
            .on_conflict_do_nothing(index_elements=["item_id", "kind"])
        )

        def tx(s: Session) -> bool:
            item = self._pending_item(s, item_id)
            if item is None:
                return False
            result: Any = s.execute(once)
            if result.rowcount != 1:
                return False
            insert_deliveries(
                s.connection(), item_id=item_id, run_id=item.run_id, targets=targets, now=now
            )
            append_events(s.connection(), item.run_id, [note], now)
            if shown is not None:
                risk = Risk(**(item.risk or {}))
                item.risk = replace(risk, steps=(*risk.steps, shown)).as_dict()
                s.flush()
                copies_need_update(s.connection(), item_id, now)
            if audit is not None:
                action, detail = audit
                insert_audit(
                    s.connection(),
                    action=action,
                    actor="timer",
                    channel="timer",
                    now=now,
                    run_id=item.run_id,
                    item_id=item_id,
                    detail=detail,
                )
            return True

        return await self.db.run(orm(tx))

    def _pending_item(self, s: Session, item_id: str) -> ItemRow | None:
        q = select(ItemRow).where(ItemRow.id == item_id)
        if self.db.is_postgres:
            q = q.with_for_update()  # a decision at the same moment waits for our deliveries
        row = s.execute(q).scalar_one_or_none()
        if row is None or row.box != Box.ACTION.value or row.status != ItemStatus.PENDING.value:
            return None
        return row


def _get_schedule(s: Session, schedule_id: str) -> ScheduleRow:
    row = s.get(ScheduleRow, schedule_id)
    if row is None:
        raise NotFound(f"no schedule {schedule_id}")
    return row


def _values(rec: ScheduleRecord) -> dict[str, Any]:
    return {
        "id": rec.id,
        "skill": rec.skill,
        "source": rec.source,
        "cron": rec.cron,
        "every_seconds": rec.every_seconds,
        "input": rec.input,
        "timezone": rec.timezone,
        "misfire": rec.misfire,
        "paused": rec.paused,
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "active_since": rec.active_since,
    }
