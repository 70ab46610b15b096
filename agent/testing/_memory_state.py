"""The memory store's state, and the writes its roles share (`pizzabot.agent.testing.memory_store`).

What `pizzabot.store`'s SQL helpers are to the SQL roles, `MemoryState` is to the memory
ones: numbering a run's events while checking its lease, writing an item with its
deliveries, closing a run's pending items, marking sent copies for update, an audit entry.
Each does it in the caller's transaction (`MemoryBase.transaction`): a snapshot taken before,
put back when the write raises, so a write that fails leaves nothing behind.

Values go in and out as the SQL store's do: what it keeps as JSON (event data, arguments, an
audit entry's detail) is copied through JSON on the way in, so a value the database would
refuse is refused here too, and nothing handed out shares state with the store.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import Event, NewEvent, load_event
from pizzabot.agent.handover import HandsOver
from pizzabot.agent.model import (
    EVENT_SCHEMA_VERSION,
    AuditEntry,
    Delivery,
    DeliveryStatus,
    Item,
    ItemStatus,
    Risk,
    Run,
    RunStatus,
    Target,
    Usage,
    transition,
)
from pizzabot.agent.store import LeaseLost, StoredRequest

T = TypeVar("T")


def as_json(value: T) -> T:
    """`value` as a JSON column gives it back: a copy, or TypeError for what JSON cannot hold."""
    return json.loads(json.dumps(value))  # type: ignore[no-any-return]


def fresh(value: T) -> T:
    """A copy to hand out: what the caller does to it never reaches the store."""
    return copy.deepcopy(value)


@dataclass(frozen=True)
class LoggedEvent:
    """An event as kept: its kind and JSON, checked again when read (`load_event`)."""

    kind: str
    data: dict[str, Any]
    at: datetime
    version: int


@dataclass
class MemoryState:
    runs: dict[str, Run] = field(default_factory=dict)
    #: A run's idempotency key → the run's id.
    run_keys: dict[str, str] = field(default_factory=dict)
    logs: dict[str, list[LoggedEvent]] = field(default_factory=dict)
    items: dict[str, Item] = field(default_factory=dict)
    #: In the order they were written (`created_at` ties keep it).
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    kill: dict[str, Any] | None = None
    requests: dict[str, StoredRequest] = field(default_factory=dict)
    delivery_count: int = 0

    # -- runs and their logs ---------------------------------------------------------------

    def run(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        return run

    def held(self, run_id: str, lease: str | None) -> Run:
        """The run, checked to be held under `lease` when one is given (fencing)."""
        run = self.runs.get(run_id)
        if run is None:
            raise LeaseLost(run_id) if lease is not None else NotFound(f"no run {run_id}")
        if lease is not None and (run.lease_owner != lease or run.status is not RunStatus.RUNNING):
            raise LeaseLost(run_id)
        return run

    def add_run(self, run: Run) -> None:
        if run.id in self.runs:
            raise ValueError(f"run {run.id} exists already")
        self.runs[run.id] = run
        self.logs[run.id] = []

    def move(self, run_id: str, status: RunStatus, now: datetime, **changes: Any) -> Run:
        """Move a run through `transition`; a run that stops running gives up its lease."""
        run = self.run(run_id)
        if run.status is not status:
            transition(run.status, status)
        if status is not RunStatus.RUNNING:
            changes.update(lease_owner=None, lease_expires_at=None)
        moved = replace(run, status=status, updated_at=now, **changes)
        self.runs[run_id] = moved
        return moved

    def append(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        now: datetime,
        *,
        lease: str | None = None,
        usage: Usage | None = None,
    ) -> list[Event]:
        """Number and keep `events` (only while `lease` is held), with the run's usage."""
        if not events and lease is None and usage is None:
            return []
        run = self.held(run_id, lease)
        if usage is not None:
            self.runs[run_id] = replace(run, usage=usage, updated_at=now)
        log = self.logs[run_id]
        first = len(log) + 1
        log.extend(
            LoggedEvent(ev.kind.value, as_json(ev.data), now, EVENT_SCHEMA_VERSION) for ev in events
        )
        return self.log(run_id)[first - 1 :]

    def log(self, run_id: str) -> list[Event]:
        return [
            load_event(
                run_id=run_id,
                seq=seq,
                kind=e.kind,
                data=as_json(e.data),
                at=e.at,
                version=e.version,
            )
            for seq, e in enumerate(self.logs.get(run_id, []), start=1)
        ]

    # -- items, deliveries, audit ----------------------------------------------------------

    def insert_item(self, item: Item, targets: Sequence[Target], now: datetime) -> Item:
        """The item as new (a decision is `record_decision`'s to write) and its deliveries."""
        if item.id in self.items:
            raise ValueError(f"item {item.id} exists already")
        kept = replace(
            item,
            args=as_json(item.args),
            schema=as_json(item.schema),
            risk=Risk(**as_json(item.risk.as_dict())),
            decided_by=None,
            decided_via=None,
            decided_at=None,
            final_args=None,
            reason=None,
            read_at=None,
        )
        self.items[item.id] = kept
        for t in targets:
            self.add_delivery(item.id, item.run_id, t.kind, t.address, now)
        return kept

    def add_delivery(
        self, item_id: str, run_id: str, channel: str, address: str, now: datetime
    ) -> None:
        self.delivery_count += 1
        delivery_id = f"d{self.delivery_count}"
        self.deliveries[delivery_id] = Delivery(
            id=delivery_id,
            item_id=item_id,
            run_id=run_id,
            channel=channel,
            address=address,
            status=DeliveryStatus.PENDING,
            attempts=0,
            ref=None,
            last_error=None,
            needs_update=False,
            next_attempt_at=None,
            created_at=now,
        )

    def copies_need_update(self, item_id: str) -> None:
        """Every sent copy of the item is to show its new state (decided, closed)."""
        for d in list(self.deliveries.values()):
            if d.item_id == item_id and d.status is DeliveryStatus.SENT:
                self.deliveries[d.id] = replace(d, needs_update=True, next_attempt_at=None)

    def close_pending(self, run_id: str, *, status: ItemStatus, now: datetime) -> list[Item]:
        """Close the run's pending actions (the run ended before anyone decided)."""
        closed = []
        for item in list(self.items.values()):
            if item.run_id == run_id and item.status is ItemStatus.PENDING:
                item = replace(
                    item,
                    status=status,
                    decided_at=now,
                    decided_via="engine",
                    decided_by="the run ended",
                )
                self.items[item.id] = item
                self.copies_need_update(item.id)
                closed.append(item)
        return closed

    def add_audit(
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
        self.audit.append(
            AuditEntry(
                id=len(self.audit) + 1,
                at=now,
                action=action,
                actor=actor,
                channel=channel,
                run_id=run_id,
                item_id=item_id,
                detail=as_json(detail or {}),
            )
        )


class MemoryBase(HandsOver):
    """What every role of the memory store shares: the state, its transactions, and the
    hand-over hook."""

    def __init__(self) -> None:
        self._state = MemoryState()

    @contextmanager
    def transaction(self) -> Iterator[MemoryState]:
        """The state to change, put back as it was when the change raises. Nothing in a
        transaction awaits, so on one event loop no other call sees it half done."""
        saved = copy.deepcopy(self._state)
        try:
            yield self._state
        except BaseException:
            self._state = saved
            raise

    @property
    def state(self) -> MemoryState:
        """The state to read (changed only in a `transaction`)."""
        return self._state
