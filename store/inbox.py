"""The inbox in SQL: items (Unread notes and Action cards), and decisions on them.

An item is written with its deliveries and the events that explain it, in one transaction;
a decision is a conditional update of a pending item (the first decision wins) committed with
its event, the run re-queued, every sent copy marked for update, and its audit entry.
Implements `pizzabot.agent.store.Inbox`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NoReturn, cast

from sqlalchemy import Connection, Table, bindparam, func, insert, select, tuple_, update
from sqlalchemy.orm import Session

from pizzabot.agent.errors import AlreadyDecided, CardChanged, NotFound
from pizzabot.agent.events import NewEvent
from pizzabot.agent.handover import ClaimedRun, HandsOver, Take
from pizzabot.agent.model import (
    DECIDED_STATUS,
    Box,
    Decision,
    Item,
    ItemKind,
    ItemStatus,
    Risk,
    RunStatus,
    Target,
    Undo,
    transition,
)
from pizzabot.agent.store import LeaseLost, RunEnd
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database, orm
from pizzabot.store.events import RUNS, append_events, read_events, run_of
from pizzabot.store.outbox import copies_need_update, insert_deliveries
from pizzabot.store.switches import kill_switch
from pizzabot.store.tables import ItemRow, RunRow, UtcDateTime

ITEMS = cast(Table, ItemRow.__table__)

_NOW = bindparam("now", type_=UtcDateTime())
_SELECT_ITEM = select(ITEMS).where(ITEMS.c.id == bindparam("item_id"))
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
#: The same decision, taken only for the version of the item its card showed.
_DECIDE_AT_VERSION = _DECIDE.where(ITEMS.c.version == bindparam("d_version"))
_INSERT_ITEM = insert(ITEMS)
_CLOSE_PENDING = (
    update(ITEMS)
    .where(ITEMS.c.run_id == bindparam("c_run"), ITEMS.c.status == ItemStatus.PENDING.value)
    .values(
        status=bindparam("c_status"),
        decided_at=_NOW,
        decided_via="engine",
        decided_by="the run ended",
    )
    .returning(*ITEMS.c)
)
_QUEUE_IF_WAITING = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("run_id"), RUNS.c.status == RunStatus.WAITING.value)
    .values(status=RunStatus.QUEUED.value, updated_at=_NOW)
)
_END_IF_WAITING = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("run_id"), RUNS.c.status == RunStatus.WAITING.value)
    .values(
        status=RunStatus.DONE.value,
        result=bindparam("result"),
        updated_at=_NOW,
        finished_at=_NOW,
        lease_owner=None,
        lease_expires_at=None,
    )
)
_TAKE_IF_WAITING = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("run_id"), RUNS.c.status == RunStatus.WAITING.value)
    .values(
        status=RunStatus.RUNNING.value,
        lease_owner=bindparam("lease"),
        lease_expires_at=bindparam("expires", type_=UtcDateTime()),
        updated_at=_NOW,
        started_at=func.coalesce(RUNS.c.started_at, _NOW),
    )
    .returning(*RUNS.c)
)


def read_item(c: Connection, item_id: str) -> Item:
    """The item `item_id`, or `NotFound`."""
    row = c.execute(_SELECT_ITEM, {"item_id": item_id}).first()
    if row is None:
        raise NotFound(f"no item {item_id}")
    return item_of(row)


def item_of(row: Any) -> Item:
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
        version=row.version,
        requested_by=row.requested_by,
        requester_person=row.requester_person,
        undo=Undo.stored(row.undo, row.undo_state) if row.undo is not None else None,
    )


def insert_item(c: Connection, item: Item, targets: Sequence[Target], now: datetime) -> None:
    """The item and its deliveries (the outbox), in the caller's transaction. A caller with
    a session flushes it first: the item's run may be one of its pending rows."""
    c.execute(
        _INSERT_ITEM,
        {
            "id": item.id,
            "run_id": item.run_id,
            "skill": item.skill,
            "box": item.box.value,
            "kind": item.kind.value,
            "status": item.status.value,
            "title": item.title,
            "body": item.body,
            "created_at": item.created_at,
            "call_id": item.call_id,
            "tool": item.tool,
            "args": item.args,
            "schema": item.schema,
            "risk": item.risk.as_dict(),
            "secret": item.secret,
            "version": item.version,
            "requested_by": item.requested_by,
            "requester_person": item.requester_person,
            "undo": item.undo.as_dict() if item.undo is not None else None,
            "undo_state": item.undo.state if item.undo is not None else None,
        },
    )
    insert_deliveries(c, item_id=item.id, run_id=item.run_id, targets=targets, now=now)


def close_pending(c: Connection, run_id: str, *, status: ItemStatus, now: datetime) -> list[Item]:
    """Close the run's pending actions (the run ended before anyone decided), in the
    caller's transaction; their sent copies are to show it."""
    rows = c.execute(_CLOSE_PENDING, {"c_run": run_id, "c_status": status.value, "now": now}).all()
    for row in rows:
        copies_need_update(c, row.id, now)
    return [item_of(r) for r in rows]


def _move_run(run: RunRow, status: RunStatus, now: datetime) -> None:
    transition(RunStatus(run.status), status)
    run.status = status.value
    run.updated_at = now
    if status is not RunStatus.RUNNING:
        run.lease_owner = None
        run.lease_expires_at = None


def _why_not_decided(c: Connection, item_id: str) -> NoReturn:
    """Raise why a decision's conditional update changed nothing: no such item, decided
    already, or pending at another version than the decision's card showed."""
    earlier = c.execute(_SELECT_ITEM, {"item_id": item_id}).first()
    if earlier is None:
        raise NotFound(f"no item {item_id}")
    if earlier.status == ItemStatus.PENDING.value:
        raise CardChanged(item_of(earlier))
    raise AlreadyDecided(item_of(earlier))


class SqlInbox(HandsOver):
    def __init__(self, db: Database) -> None:
        self.db = db

    async def create_item(
        self,
        item: Item,
        *,
        targets: Sequence[Target],
        lease: str | None,
        now: datetime,
        run_status: RunStatus | None = None,
        events: Sequence[NewEvent] = (),
    ) -> Item:
        def tx(s: Session) -> Item:
            run = s.get(RunRow, item.run_id)
            if run is None:
                raise NotFound(f"no run {item.run_id}")
            if lease is not None and (
                run.lease_owner != lease or run.status != RunStatus.RUNNING.value
            ):
                raise LeaseLost(item.run_id)
            insert_item(s.connection(), item, targets, now)
            append_events(s.connection(), item.run_id, events, now)
            if run_status is not None:
                _move_run(run, run_status, now)
            return item

        return await self.db.run(orm(tx))

    async def create_items(
        self,
        items: Sequence[tuple[Item, Sequence[NewEvent]]],
        *,
        targets: Sequence[Target],
        lease: str | None,
        now: datetime,
        run_status: RunStatus | None = None,
    ) -> list[Item]:
        def tx(s: Session) -> list[Item]:
            for item, events in items:
                run = s.get(RunRow, item.run_id)
                if run is None:
                    raise NotFound(f"no run {item.run_id}")
                if lease is not None and (
                    run.lease_owner != lease or run.status != RunStatus.RUNNING.value
                ):
                    raise LeaseLost(item.run_id)
                insert_item(s.connection(), item, targets, now)
                append_events(s.connection(), item.run_id, events, now)
            if run_status is not None:
                for run_id in dict.fromkeys(i.run_id for i, _ in items):
                    run = s.get(RunRow, run_id)
                    assert run is not None
                    _move_run(run, run_status, now)
            return [i for i, _ in items]

        return await self.db.run(orm(tx))

    async def get_item(self, item_id: str) -> Item:
        return await self.db.read(lambda c: read_item(c, item_id))

    async def list_items(
        self,
        *,
        box: Box | None = None,
        status: ItemStatus | None = None,
        run_id: str | None = None,
        limit: int = 200,
        created_after: datetime | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[Item]:
        q = select(ITEMS).order_by(ITEMS.c.created_at.desc(), ITEMS.c.id.desc()).limit(limit)
        if created_after is not None:
            q = q.where(ITEMS.c.created_at > created_after)
        if before is not None:
            # A row value, which both databases read from the index as a range.
            q = q.where(tuple_(ITEMS.c.created_at, ITEMS.c.id) < before)
        if box is not None:
            q = q.where(ITEMS.c.box == box.value)
        if status is not None:
            q = q.where(ITEMS.c.status == status.value)
        if run_id is not None:
            q = q.where(ITEMS.c.run_id == run_id)

        def tx(c: Connection) -> list[Item]:
            return [item_of(r) for r in c.execute(q)]

        return await self.db.run(tx)

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
        version: int | None = None,
        ends: RunEnd | None = None,
    ) -> Item:
        take = self._offer()
        went_on = False
        new_status = status or DECIDED_STATUS[decision.kind]
        reason = getattr(decision, "reason", None) or None
        decide = {
            "item_id": item_id,
            "now": now,
            "d_status": new_status.value,
            "d_actor": actor,
            "d_via": channel,
            "d_args": final_args,
            "d_reason": reason,
            "d_version": version,
        }
        statement = _DECIDE if version is None else _DECIDE_AT_VERSION

        def tx(c: Connection) -> Item:
            nonlocal went_on
            # The first decision wins: only a pending item is updated, and only at the
            # version the decision was made on.
            row = c.execute(statement, decide).first()
            if row is None:
                _why_not_decided(c, item_id)
            run_id = row.run_id
            went_on = ends is None or not self._end(c, run_id, event, ends, now)
            if went_on:
                self._go_on(c, run_id, event, take, now)
            copies_need_update(c, item_id, now)
            detail = {
                "decision": decision.kind,
                "status": new_status.value,
                "args_before": row.args,
                "args_after": final_args,
                "reason": reason,
            }
            where = {"run_id": run_id, "item_id": item_id}
            insert_audit(
                c, action="decision", actor=actor, channel=channel, now=now, detail=detail, **where
            )
            return item_of(row)

        item = await self.db.run(tx)
        if went_on:
            self._handed_over(take)
        return item

    def _go_on(
        self, c: Connection, run_id: str, event: NewEvent, take: Take | None, now: datetime
    ) -> None:
        """The decided run goes on: its decision event, then re-queued (or taken by the
        worker that offered `take`), and announced to other processes' waiters."""
        if take is not None:
            take.claimed = None  # a try before this one may have rolled back
        append_events(c, run_id, [event], now)
        if take is None or not self._take(c, run_id, take, now):
            c.execute(_QUEUE_IF_WAITING, {"run_id": run_id, "now": now})
        # Also when taken: other processes' waiters on an answer listen for it.
        self.db.notify_runnable(c, run_id)

    def _end(
        self, c: Connection, run_id: str, event: NewEvent, ends: RunEnd, now: datetime
    ) -> bool:
        """End the decided run DONE if it waits (False: it does not, and goes on as any
        run does), and announce it to other processes' waiters."""
        params = {"run_id": run_id, "now": now, "result": ends.result}
        if c.execute(_END_IF_WAITING, params).rowcount != 1:
            return False
        append_events(c, run_id, [event, ends.event], now)
        self.db.notify_runnable(c, run_id)
        return True

    @staticmethod
    def _take(c: Connection, run_id: str, take: Take, now: datetime) -> bool:
        """Claim the decided run for `take` if it waits (not while the kill switch is on):
        from waiting straight to running, so no other worker ever sees it queued."""
        if kill_switch(c) is not None:
            return False
        params = {
            "run_id": run_id,
            "now": now,
            "lease": take.lease,
            "expires": now + timedelta(seconds=take.lease_seconds),
        }
        run = c.execute(_TAKE_IF_WAITING, params).first()
        if run is None:
            return False
        take.claimed = ClaimedRun(run_of(run), read_events(c, run_id))
        return True

    async def close_items(self, run_id: str, *, status: ItemStatus, now: datetime) -> list[Item]:
        def tx(c: Connection) -> list[Item]:
            return close_pending(c, run_id, status=status, now=now)

        return await self.db.run(tx)

    async def show_again(self, item_id: str, *, now: datetime) -> None:
        """Mark every sent copy of the item for an update, so each shows it as it is now."""

        def tx(c: Connection) -> None:
            copies_need_update(c, item_id, now)

        await self.db.run(tx)

    async def mark_read(self, item_id: str, *, now: datetime) -> Item:
        def tx(s: Session) -> Item:
            row = s.get(ItemRow, item_id)
            if row is None:
                raise NotFound(f"no item {item_id}")
            if row.box == Box.UNREAD.value and row.status == ItemStatus.UNREAD.value:
                row.status = ItemStatus.READ.value
                row.read_at = now
            return item_of(row)

        return await self.db.run(orm(tx))
