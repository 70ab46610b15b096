"""The outbox in SQL: one delivery row per item per address, sent and updated by the
dispatcher (`agent.outbox`), and found again by the channel's own reference to its copy.

Deliveries are inserted by whoever writes the item (`insert_deliveries`, in that write's
transaction), so an item never exists without them. Implements `agent.store.Outbox` and
`agent.store.Deliveries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, and_, bindparam, or_, select, update
from sqlalchemy.orm import Session

from agent.addresses import DeliveryRef, ref_from_json, ref_to_json
from agent.context import new_id
from agent.errors import NotFound
from agent.model import Box, Delivery, DeliveryStatus, ItemStatus, Target
from store.database import Database
from store.tables import DeliveryRow, ItemRow, UtcDateTime

DELIVERIES = cast(Table, DeliveryRow.__table__)

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
    s: Session, *, item_id: str, run_id: str, targets: Sequence[Target], now: datetime
) -> None:
    """A pending delivery of the item to each target, for the dispatcher to send."""
    for t in targets:
        s.add(
            DeliveryRow(
                id=new_id(),
                item_id=item_id,
                run_id=run_id,
                channel=t.kind,
                address=t.address,
                status=DeliveryStatus.PENDING.value,
                attempts=0,
                needs_update=False,
                created_at=now,
                updated_at=now,
            )
        )


def copies_need_update(c: Connection, item_id: str, now: datetime) -> None:
    """Every sent copy of the item is to show its new state (decided, closed)."""
    c.execute(_COPIES_NEED_UPDATE, {"c_item": item_id, "now": now})


class SqlOutbox:
    def __init__(self, db: Database) -> None:
        self.db = db

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
        return await self._select(q)

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

        await self.db.session(tx)

    async def delivery_updated(self, delivery_id: str, *, now: datetime) -> None:
        def tx(c: Connection) -> None:
            c.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery_id)
                .values(needs_update=False, last_error=None, next_attempt_at=None, updated_at=now)
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
            if retry_at is None:
                if row.status == DeliveryStatus.PENDING.value:
                    row.status = DeliveryStatus.FAILED.value
                else:
                    row.needs_update = False

        await self.db.session(tx)

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

    async def _select(self, q: Any) -> list[Delivery]:
        def tx(c: Connection) -> list[Delivery]:
            return [delivery_of(r) for r in c.execute(q)]

        return await self.db.run(tx)
