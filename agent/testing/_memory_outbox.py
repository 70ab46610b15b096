"""The memory store's outbox (`Outbox`), audit trail (`AuditLog`) and kill switch (`Switches`).

A delivery is due while pending, or sent and in need of an update, once its next attempt's
time has come; giving one up makes it a dead letter (failed, never due again) with the audit
entry `delivery_dead`. `attempts` counts the failures in a row of what it is doing now.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime
from typing import Any

from pizzabot.agent.addresses import DeliveryRef
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import AuditEntry, Box, Delivery, DeliveryStatus, ItemStatus
from pizzabot.agent.testing._memory_state import MemoryBase, MemoryState, fresh


def _due(d: Delivery, now: datetime) -> bool:
    if d.next_attempt_at is not None and d.next_attempt_at > now:
        return False
    return d.status is DeliveryStatus.PENDING or (
        d.status is DeliveryStatus.SENT and d.needs_update
    )


def _delivery(s: MemoryState, delivery_id: str) -> Delivery:
    d = s.deliveries.get(delivery_id)
    if d is None:
        raise NotFound(f"no delivery {delivery_id}")
    return d


class MemoryOutbox(MemoryBase):
    async def channels_with_work(self) -> set[str]:
        return {
            d.channel
            for d in self.state.deliveries.values()
            if d.status is DeliveryStatus.PENDING or d.needs_update
        }

    async def due_deliveries(
        self,
        *,
        now: datetime,
        limit: int = 50,
        channels: Collection[str] | None = None,
        except_channels: Collection[str] = (),
        skip: Collection[str] = (),
    ) -> list[Delivery]:
        due = [
            d
            for d in self.state.deliveries.values()
            if _due(d, now)
            and (channels is None or d.channel in channels)
            and d.channel not in except_channels
            and d.id not in skip
        ]
        return fresh(sorted(due, key=lambda d: d.created_at)[:limit])

    async def delivery_sent(
        self, delivery_id: str, *, ref: DeliveryRef | None, now: datetime
    ) -> None:
        with self.transaction() as s:
            d = _delivery(s, delivery_id)
            item = s.items.get(d.item_id)
            # Decided while the first send was in flight: the copy needs the outcome too.
            decided = (
                item is not None
                and item.box is Box.ACTION
                and item.status is not ItemStatus.PENDING
            )
            s.deliveries[d.id] = replace(
                d,
                status=DeliveryStatus.SENT,
                ref=ref,
                attempts=0,
                last_error=None,
                next_attempt_at=None,
                needs_update=decided,
            )

    async def delivery_updated(self, delivery_id: str, *, now: datetime) -> None:
        with self.transaction() as s:
            d = s.deliveries.get(delivery_id)
            if d is not None:
                s.deliveries[d.id] = replace(
                    d, needs_update=False, attempts=0, last_error=None, next_attempt_at=None
                )

    async def delivery_failed(
        self, delivery_id: str, *, error: str, retry_at: datetime | None, now: datetime
    ) -> None:
        with self.transaction() as s:
            d = _delivery(s, delivery_id)
            d = replace(d, attempts=d.attempts + 1, last_error=error, next_attempt_at=retry_at)
            if retry_at is None:
                d = replace(d, status=DeliveryStatus.FAILED, needs_update=False)
                s.add_audit(
                    action="delivery_dead",
                    actor="outbox",
                    channel=d.channel,
                    now=now,
                    run_id=d.run_id,
                    item_id=d.item_id,
                    detail={"delivery_id": d.id, "attempts": d.attempts, "error": error},
                )
            s.deliveries[d.id] = d

    async def deliveries(self, item_id: str) -> list[Delivery]:
        found = [d for d in self.state.deliveries.values() if d.item_id == item_id]
        return fresh(sorted(found, key=lambda d: d.created_at))

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]:
        found = [
            d for d in self.state.deliveries.values() if d.run_id == run_id and d.channel == channel
        ]
        return fresh(sorted(found, key=lambda d: d.created_at))

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None:
        for d in self.state.deliveries.values():
            if d.channel == channel and d.ref is not None and d.ref.external_id == external_id:
                return fresh(d)
        return None


class MemoryAudit(MemoryBase):
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
        with self.transaction() as s:
            s.add_audit(
                action=action,
                actor=actor,
                channel=channel,
                now=now,
                run_id=run_id,
                item_id=item_id,
                detail=detail,
            )

    async def audit_log(self, *, limit: int = 200) -> list[AuditEntry]:
        return fresh(self.state.audit[::-1][:limit])


class MemorySwitches(MemoryBase):
    async def get_kill(self) -> dict[str, Any] | None:
        return fresh(self.state.kill)

    async def set_kill(
        self, *, on: bool, actor: str, now: datetime, reason: str | None = None
    ) -> None:
        value: dict[str, Any] = {"on": on, "by": actor, "at": now.isoformat()}
        if reason:
            value["reason"] = reason
        with self.transaction() as s:
            s.kill = value if on else None
