"""The outbox in SQL: one delivery row per item per address, sent and updated by the
dispatcher (`pizzabot.agent.outbox`), and found again by the channel's own reference to its copy.

Deliveries are inserted by whoever writes the item (`insert_deliveries`, in that write's
transaction), so an item never exists without them. Implements `pizzabot.agent.store.Outbox` and
`pizzabot.agent.store.Deliveries`.

A row's `attempts` counts the failed attempts in a row of what it is doing now (its send, or
its latest update): a success sets it back to 0, so every update gets the outbox's full
number of tries. A delivery given up is a dead letter, status `failed` whether its send or an
update gave up (a sent copy keeps its ref, so replies and buttons on it still find it); it is
never due again, and giving it up writes the audit entry `delivery_dead` in the same
transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Select,
    Table,
    and_,
    bindparam,
    func,
    insert,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.orm import Session

from pizzabot.agent.addresses import DeliveryRef, ref_from_json, ref_to_json
from pizzabot.agent.context import new_id
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Delivery, DeliveryStatus, ItemStatus, Target
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database, orm
from pizzabot.store.tables import DeliveryRow, ItemRow, UtcDateTime

DELIVERIES = cast(Table, DeliveryRow.__table__)
_INSERT_DELIVERY = insert(DELIVERIES)

_COPIES_NEED_UPDATE = (
    update(DELIVERIES)
    .where(
        DELIVERIES.c.item_id == bindparam("c_item"),
        DELIVERIES.c.status == DeliveryStatus.SENT.value,
    )
    .values(
        needs_update=True, next_attempt_at=None, updated_at=bindparam("now", type_=UtcDateTime())
    )
)


def delivery_of(row: Any) -> Delivery:
    return Delivery(
        id=row.id,
        item_id=row.item_id,
        run_id=row.run_id,
        channel=row.channel,
        address=row.address,
        status=DeliveryStatus(row.status),
        attempts=row.attempts,
        ref=ref_from_json(row.ref, channel=row.channel),
        last_error=row.last_error,
        needs_update=row.needs_update,
        next_attempt_at=row.next_attempt_at,
        created_at=row.created_at,
    )


def insert_deliveries(
    c: Connection, *, item_id: str, run_id: str, targets: Sequence[Target], now: datetime
) -> None:
    """A pending delivery of the item to each target, for the dispatcher to send."""
    if not targets:
        return
    c.execute(
        _INSERT_DELIVERY,
        [
            {
                "id": new_id(),
                "item_id": item_id,
                "run_id": run_id,
                "channel": t.kind,
                "address": t.address,
                "status": DeliveryStatus.PENDING.value,
                "attempts": 0,
                "needs_update": False,
                "created_at": now,
                "updated_at": now,
            }
            for t in targets
        ],
    )


def copies_need_update(c: Connection, item_id: str, now: datetime) -> None:
    """Every sent copy of the item is to show its new state (decided, closed)."""
    c.execute(_COPIES_NEED_UPDATE, {"c_item": item_id, "now": now})


#: What the outbox still has work on, word for word as `ix_deliveries_work` says it (literals,
#: not parameters): implied by what `due_deliveries` asks for, and what lets the databases
#: read that partial index instead of every delivery ever sent.
OUTBOX_WORK = or_(
    DELIVERIES.c.status == literal_column(f"'{DeliveryStatus.PENDING.value}'"),
    DELIVERIES.c.needs_update == true(),
)

_WITH_WORK = select(DELIVERIES.c.channel).where(OUTBOX_WORK).distinct()


@functools.cache
def _due_statement(*, by_channel: bool, skipping: bool) -> Select[Any]:
    """What `due_deliveries` sends, built once per shape: the outbox looks at every wake-up
    (each card, each decision), and building the statement cost as much as running it."""
    now = bindparam("now", type_=UtcDateTime())
    due = or_(DELIVERIES.c.next_attempt_at.is_(None), DELIVERIES.c.next_attempt_at <= now)
    q = select(DELIVERIES).where(
        OUTBOX_WORK,
        or_(
            and_(DELIVERIES.c.status == DeliveryStatus.PENDING.value, due),
            and_(
                DELIVERIES.c.status == DeliveryStatus.SENT.value,
                DELIVERIES.c.needs_update.is_(True),
                due,
            ),
        ),
    )
    if by_channel:
        q = q.where(DELIVERIES.c.channel.in_(bindparam("channels", expanding=True)))
    if skipping:
        q = q.where(DELIVERIES.c.id.not_in(bindparam("skip", expanding=True)))
    return q.order_by(DELIVERIES.c.created_at).limit(bindparam("limit"))


class SqlOutbox:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def due_deliveries(
        self,
        *,
        now: datetime,
        limit: int = 50,
        channels: Collection[str] | None = None,
        except_channels: Collection[str] = (),
        skip: Collection[str] = (),
    ) -> list[Delivery]:
        if except_channels:
            # Named, not excluded: `channel NOT IN (…)` leaves the databases no part of the
            # work index to search, and SQLite then reads every copy ever sent to find the
            # few with work. The channels with work come from that index alone.
            others = (await self.channels_with_work()).difference(except_channels)
            channels = others if channels is None else others.intersection(channels)
        if channels is not None and not channels:
            return []
        q = _due_statement(by_channel=channels is not None, skipping=bool(skip))
        params: dict[str, Any] = {"now": now, "limit": limit}
        if channels is not None:
            params["channels"] = sorted(channels)
        if skip:
            params["skip"] = list(skip)

        def tx(c: Connection) -> list[Delivery]:
            return [delivery_of(r) for r in c.execute(q, params)]

        return await self.db.run(tx)

    async def dead_letters(self) -> dict[str, int]:
        """How many deliveries were given up (status failed), by channel."""
        q = (
            select(DELIVERIES.c.channel, func.count())
            .where(DELIVERIES.c.status == DeliveryStatus.FAILED.value)
            .group_by(DELIVERIES.c.channel)
        )

        def tx(c: Connection) -> dict[str, int]:
            return {str(channel): int(n) for channel, n in c.execute(q)}

        return await self.db.read(tx)

    async def delivery_sent(
        self, delivery_id: str, *, ref: DeliveryRef | None, now: datetime
    ) -> None:
        def tx(s: Session) -> None:
            row = s.get(DeliveryRow, delivery_id)
            if row is None:
                raise NotFound(f"no delivery {delivery_id}")
            item = s.get(ItemRow, row.item_id)
            row.status = DeliveryStatus.SENT.value
            row.ref = ref_to_json(ref) if ref is not None else None
            row.external_id = ref.external_id if ref is not None else None
            row.attempts = 0
            row.last_error = None
            row.next_attempt_at = None
            # Decided while the first send was in flight: the copy needs the outcome too.
            row.needs_update = bool(
                item is not None
                and item.box == Box.ACTION.value
                and item.status != ItemStatus.PENDING.value
            )
            row.updated_at = now

        await self.db.run(orm(tx))

    async def delivery_updated(self, delivery_id: str, *, now: datetime) -> None:
        def tx(c: Connection) -> None:
            c.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery_id)
                .values(
                    needs_update=False,
                    attempts=0,
                    last_error=None,
                    next_attempt_at=None,
                    updated_at=now,
                )
            )

        await self.db.run(tx)

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
            if retry_at is not None:
                return
            row.status = DeliveryStatus.FAILED.value
            row.needs_update = False
            insert_audit(
                s.connection(),
                action="delivery_dead",
                actor="outbox",
                channel=row.channel,
                now=now,
                run_id=row.run_id,
                item_id=row.item_id,
                detail={"delivery_id": row.id, "attempts": row.attempts, "error": error},
            )

        await self.db.run(orm(tx))

    async def deliveries(self, item_id: str) -> list[Delivery]:
        q = select(DELIVERIES).where(DELIVERIES.c.item_id == item_id)
        return await self._select(q.order_by(DELIVERIES.c.created_at))

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]:
        q = select(DELIVERIES).where(DELIVERIES.c.run_id == run_id, DELIVERIES.c.channel == channel)
        return await self._select(q.order_by(DELIVERIES.c.created_at))

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None:
        q = select(DELIVERIES).where(
            DELIVERIES.c.channel == channel, DELIVERIES.c.external_id == external_id
        )
        found = await self._select(q.limit(1))
        return found[0] if found else None

    async def channels_with_work(self) -> set[str]:
        # From the work index alone: a few rows, however many copies were sent before.
        return await self.db.read(lambda c: {str(ch) for ch in c.execute(_WITH_WORK).scalars()})

    async def _select(self, q: Any) -> list[Delivery]:
        def tx(c: Connection) -> list[Delivery]:
            return [delivery_of(r) for r in c.execute(q)]

        return await self.db.run(tx)
