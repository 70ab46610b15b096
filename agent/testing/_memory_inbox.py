"""The memory store's inbox: items, and the decisions on them (`InboxItems`).

An item is written with its deliveries and its events, and moves its run, in one
transaction. The first decision wins: only a pending item (at the version its card showed,
when given) is decided; with it come its event, the run going on (re-queued, taken by the
worker that offered, or ended), its sent copies marked for update, and its audit entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from pizzabot.agent.errors import AlreadyDecided, CardChanged, NotFound
from pizzabot.agent.events import NewEvent
from pizzabot.agent.handover import ClaimedRun, Take
from pizzabot.agent.model import (
    DECIDED_STATUS,
    Box,
    Decision,
    Item,
    ItemStatus,
    RunStatus,
    Target,
)
from pizzabot.agent.store import RunEnd
from pizzabot.agent.testing._memory_runs import take_run
from pizzabot.agent.testing._memory_state import MemoryBase, MemoryState, as_json, fresh


def _decide(s: MemoryState, item_id: str, version: int | None, **decided: Any) -> tuple[Item, Item]:
    """The item before and after its decision; raise why it cannot be decided."""
    item = s.items.get(item_id)
    if item is None:
        raise NotFound(f"no item {item_id}")
    if item.status is not ItemStatus.PENDING:
        raise AlreadyDecided(fresh(item))
    if version is not None and item.version != version:
        raise CardChanged(fresh(item))
    s.items[item_id] = replace(item, **decided)
    return item, s.items[item_id]


def _go_on(s: MemoryState, run_id: str, event: NewEvent, take: Take | None, now: datetime) -> None:
    """The decided run goes on: its decision event, then re-queued if it waits (or taken by
    the worker that offered `take`, unless the kill switch is on)."""
    s.append(run_id, [event], now)
    run = s.run(run_id)
    if run.status is not RunStatus.WAITING:
        return
    if take is not None and s.kill is None:
        taken = take_run(s, run, take.lease, now, take.lease_seconds)
        take.claimed = ClaimedRun(fresh(taken), s.log(run_id))
    else:
        s.runs[run_id] = replace(run, status=RunStatus.QUEUED, updated_at=now)


def _end(s: MemoryState, run_id: str, event: NewEvent, ends: RunEnd, now: datetime) -> bool:
    """End the decided run DONE if it waits (False: it does not)."""
    run = s.run(run_id)
    if run.status is not RunStatus.WAITING:
        return False
    s.runs[run_id] = replace(
        run,
        status=RunStatus.DONE,
        result=ends.result,
        updated_at=now,
        finished_at=now,
        lease_owner=None,
        lease_expires_at=None,
    )
    s.append(run_id, [event, ends.event], now)
    return True


class MemoryInbox(MemoryBase):
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
        return (
            await self.create_items(
                [(item, events)], targets=targets, lease=lease, now=now, run_status=run_status
            )
        )[0]

    async def create_items(
        self,
        items: Sequence[tuple[Item, Sequence[NewEvent]]],
        *,
        targets: Sequence[Target],
        lease: str | None,
        now: datetime,
        run_status: RunStatus | None = None,
    ) -> list[Item]:
        with self.transaction() as s:
            for item, events in items:
                s.run(item.run_id)
                s.held(item.run_id, lease)
                s.insert_item(item, targets, now)
                s.append(item.run_id, events, now)
            if run_status is not None:
                for run_id in dict.fromkeys(i.run_id for i, _ in items):
                    s.move(run_id, run_status, now)
            return [i for i, _ in items]

    async def get_item(self, item_id: str) -> Item:
        item = self.state.items.get(item_id)
        if item is None:
            raise NotFound(f"no item {item_id}")
        return fresh(item)

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
        found = [
            i
            for i in self.state.items.values()
            if (box is None or i.box is box)
            and (status is None or i.status is status)
            and (run_id is None or i.run_id == run_id)
            and (created_after is None or i.created_at > created_after)
            and (before is None or (i.created_at, i.id) < before)
        ]
        found.sort(key=lambda i: (i.created_at, i.id), reverse=True)
        return fresh(found[:limit])

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
        new_status = status or DECIDED_STATUS[decision.kind]
        reason = getattr(decision, "reason", None) or None
        with self.transaction() as s:
            before, after = _decide(
                s,
                item_id,
                version,
                status=new_status,
                decided_by=actor,
                decided_via=channel,
                decided_at=now,
                final_args=as_json(final_args),
                reason=reason,
            )
            went_on = ends is None or not _end(s, before.run_id, event, ends, now)
            if went_on:
                _go_on(s, before.run_id, event, take, now)
            s.copies_need_update(item_id)
            detail = {
                "decision": decision.kind,
                "status": new_status.value,
                "args_before": before.args,
                "args_after": final_args,
                "reason": reason,
            }
            s.add_audit(
                action="decision",
                actor=actor,
                channel=channel,
                now=now,
                run_id=before.run_id,
                item_id=item_id,
                detail=detail,
            )
        if went_on:
            self._handed_over(take)
        return fresh(after)

    async def show_again(self, item_id: str, *, now: datetime) -> None:
        with self.transaction() as s:
            s.copies_need_update(item_id)

    async def mark_read(self, item_id: str, *, now: datetime) -> Item:
        with self.transaction() as s:
            item = s.items.get(item_id)
            if item is None:
                raise NotFound(f"no item {item_id}")
            if item.box is Box.UNREAD and item.status is ItemStatus.UNREAD:
                item = replace(item, status=ItemStatus.READ, read_at=now)
                s.items[item_id] = item
            return fresh(item)
