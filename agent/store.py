"""What the engine and the channels need from persistence, as protocols sized to their roles.

Each part of the server names the roles it uses, and nothing more: the engine the whole
`Store`; a channel a few readers (`RunReader`, `ItemReader`, `DeliveryReader`) and the
`AuditTrail`; the outbox dispatcher the `Outbox`; the clock `ItemTimers`; the email channel
its `MailLog`. `pizzabot.store.SqlStore` implements `Store` on SQLAlchemy (SQLite or PostgreSQL),
`pizzabot.agent.testing.memory_store.MemoryStore` in memory (for tests), and the contract
tests in `tests/contract/`, written against these protocols role by role, hold every backend
to the same behaviour. Methods that change a run take its lease token: a worker that lost its
lease cannot write (fencing).

    Store = RunStore + InboxItems + Outbox + AuditLog + Switches + RequestStore + Undos
    RunStore ⊃ RunReader · InboxItems ⊃ ItemReader · Outbox ⊃ DeliveryReader · AuditLog ⊃ AuditTrail
    ItemTimers, MailLog: kept beside the store (`pizzabot.store.triggers`, `pizzabot.store.mail`)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from pizzabot.agent.addresses import DeliveryRef
from pizzabot.agent.events import Event, NewEvent
from pizzabot.agent.handover import ClaimedRun, HandOverHook
from pizzabot.agent.model import (
    AuditEntry,
    Box,
    Decision,
    Delivery,
    Item,
    ItemStatus,
    Run,
    RunStatus,
    Target,
    Usage,
)


class LeaseLost(Exception):
    """The run is no longer owned by this worker; stop touching it."""


@dataclass(frozen=True)
class RunEnd:
    """A decision that ends its run in its own transaction: a request's run, which has
    nothing left to do once decided, is DONE with `result`, its log closed by `event`."""

    result: str
    event: NewEvent


class RunReader(Protocol):
    """Looking a run up."""

    async def get_run(self, run_id: str) -> Run: ...


class RunStore(RunReader, HandOverHook, Protocol):
    """The run store: runs, their leases and their event logs."""

    async def list_runs(
        self, *, limit: int = 100, status: RunStatus | None = None
    ) -> list[Run]: ...

    async def events(self, run_id: str) -> list[Event]: ...

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
        """Insert a queued run with its first events. With an idempotency key that was used
        before, return that earlier run instead. With a worker installed (`HandsOver`), the
        new run is claimed for it in the same transaction (running, unless the kill switch
        is on) and started once committed."""
        ...

    async def claim_runs(
        self, *, lease: str, now: datetime, lease_seconds: float, limit: int
    ) -> list[ClaimedRun]:
        """Take up to `limit` runs, oldest first, under the token `lease`, in one transaction: queued
        ones, or running ones whose lease expired; none while the kill switch is on. Fewer
        than `limit` means no more were claimable."""
        ...

    async def renew_lease(
        self, run_id: str, *, lease: str, now: datetime, lease_seconds: float
    ) -> Run:
        """Extend the lease and return the run; raise LeaseLost when it is no longer ours."""
        ...

    async def set_status(
        self,
        run_id: str,
        status: RunStatus,
        *,
        lease: str | None,
        now: datetime,
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        killed_by: str | None = None,
    ) -> Run:
        """Move a run through `pizzabot.agent.model.transition`; with `lease`, only while it is held."""
        ...

    async def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        lease: str | None,
        now: datetime,
        events: Sequence[NewEvent],
        unread: Item,
        targets: Sequence[Target],
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        killed_by: str | None = None,
    ) -> Run:
        """End a run in one transaction: its status, `events` (the last is RUN_FINISHED, those
        before it the model's final answer), its pending actions closed, and the `unread`
        item with its deliveries."""
        ...

    async def requeue(self, run_id: str, *, now: datetime, events: Sequence[NewEvent] = ()) -> Run:
        """Put a waiting or finished run back in the queue (a decision, a follow-up)."""
        ...

    async def append_events(
        self,
        run_id: str,
        events: Sequence[NewEvent],
        *,
        lease: str | None,
        now: datetime,
        usage: Usage | None = None,
    ) -> list[Event]:
        """Append to the run's log (only while `lease` is held), and record the run's
        usage so far in the same transaction when given."""
        ...

    async def add_budget(
        self,
        run_id: str,
        extra: dict[str, float],
        *,
        lease: str | None,
        now: datetime,
        event: NewEvent,
    ) -> list[Event]:
        """Add `extra` to the run's budget and append `event` (BUDGET_EXTENDED) in one
        transaction, while `lease` is held; return the appended event."""
        ...

    async def runs_with_status(self, status: RunStatus) -> list[str]: ...

    async def skill_usage_since(self, skill: str, since: datetime) -> Usage:
        """What all runs of `skill` created since `since` used, together (daily budgets)."""
        ...


class ItemReader(Protocol):
    """Reading inbox items."""

    async def get_item(self, item_id: str) -> Item: ...

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
        """Newest first; `before`: only those after this (created_at, id) in that order, the
        next page of a reader that pages through them."""
        ...


class CardRefresh(Protocol):
    async def show_again(self, item_id: str, *, now: datetime) -> None:
        """Mark every sent copy of the item for an update (a decision came from a card that
        no longer shows it: its person gets the new one)."""
        ...


class InboxItems(ItemReader, CardRefresh, HandOverHook, Protocol):
    """The inbox: items, and the decisions on them."""

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
        """Insert an item, its deliveries (the outbox) and optionally move the run, in one
        transaction, so an item is never without its deliveries."""
        ...

    async def create_items(
        self,
        items: Sequence[tuple[Item, Sequence[NewEvent]]],
        *,
        targets: Sequence[Target],
        lease: str | None,
        now: datetime,
        run_status: RunStatus | None = None,
    ) -> list[Item]:
        """`create_item` for several items and their events in one transaction: the cards
        of one model turn appear together (and together with the run's move), or none."""
        ...

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
        """The first decision wins: a conditional update of a pending item (at `version`,
        when given). In the same transaction: the decision event on the run, the run
        re-queued (or claimed for the installed worker, `HandsOver`; given `ends` and a
        waiting run, ended DONE at once), every sent delivery marked for update, and
        an audit entry. Raise AlreadyDecided when the item was decided, CardChanged when it
        is pending at another version."""
        ...

    async def mark_read(self, item_id: str, *, now: datetime) -> Item: ...


class DeliveryReader(Protocol):
    """Reading deliveries: an item's copies, a run's copies on one channel, and the copy a
    channel's own reference points at (a reply's thread, a button's message)."""

    async def deliveries(self, item_id: str) -> list[Delivery]: ...

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]:
        """The run's deliveries on `channel`, oldest first."""
        ...

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None:
        """The delivery whose ref's `external_id` is `external_id` (a Slack ts, a Message-ID)."""
        ...


class Outbox(DeliveryReader, Protocol):
    """What the dispatcher (`pizzabot.agent.outbox`) does with deliveries."""

    async def channels_with_work(self) -> set[str]:
        """The channels with deliveries still to send or copies to update, due now or later
        (perhaps a few more): a look cheap enough for every wake-up, so the dispatcher reads
        only those channels' lanes."""
        ...

    async def due_deliveries(
        self,
        *,
        now: datetime,
        limit: int = 50,
        channels: Collection[str] | None = None,
        except_channels: Collection[str] = (),
        skip: Collection[str] = (),
    ) -> list[Delivery]:
        """Pending deliveries whose next attempt is due, and sent ones that need an update,
        oldest first: only on `channels` (None: any), on none of `except_channels`, and
        without the deliveries whose ids are in `skip` (those under way)."""
        ...

    async def delivery_sent(
        self, delivery_id: str, *, ref: DeliveryRef | None, now: datetime
    ) -> None: ...

    async def delivery_updated(self, delivery_id: str, *, now: datetime) -> None: ...

    async def delivery_failed(
        self, delivery_id: str, *, error: str, retry_at: datetime | None, now: datetime
    ) -> None:
        """An attempt failed: try again at `retry_at`; None gives it up for good (a dead
        letter: status failed, and an audit entry `delivery_dead` in the same transaction)."""
        ...


class AuditTrail(Protocol):
    """Where who did what is written."""

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
    ) -> None: ...


class AuditLog(AuditTrail, Protocol):
    """The audit trail, and reading it back (newest first)."""

    async def audit_log(self, *, limit: int = 200) -> list[AuditEntry]: ...


class Switches(Protocol):
    """The global kill switch."""

    async def get_kill(self) -> dict[str, Any] | None:
        """Who turned it on, when and why (`by`, `at`, `reason`), or None while it is off."""
        ...

    async def set_kill(
        self, *, on: bool, actor: str, now: datetime, reason: str | None = None
    ) -> None: ...


def kill_reason(kill: dict[str, Any]) -> str:
    """The kill switch's state in words: "turned on by owner at …: why"."""
    said = f"turned on by {kill.get('by', 'someone')} at {kill.get('at', 'some time')}"
    reason = kill.get("reason")
    return f"{said}: {reason}" if reason else said


@dataclass(frozen=True)
class StoredRequest:
    """A request from an agent Pizza Bot does not run (`pizzabot.agent.requests`): the run and item it
    is, who asked, and what makes a repeat recognisable (the key, the body's hash)."""

    id: str
    run_id: str
    item_id: str
    skill: str
    kind: Literal["approval", "question"]
    requester: str
    idempotency_key: str | None
    body_hash: str
    callback_url: str | None
    #: Seconds after which nobody answered in time (the item expires); None: the skill's.
    timeout: float | None
    created_at: datetime


class RequestStore(Protocol):
    """Requests: each one a run of an inbox-only skill with one Action item."""

    async def create_request(
        self,
        request: StoredRequest,
        *,
        input: str,
        item: Item,
        events: Sequence[NewEvent],
        targets: Sequence[Target],
        run_status: RunStatus,
        result: str | None = None,
    ) -> tuple[StoredRequest, bool]:
        """In one transaction: the run (WAITING, or DONE when decided at once, with
        `result`), its `events`, the item (decided already or not) with its deliveries and a
        callback delivery, and the request. A key the requester used before returns that
        request instead (False: not created)."""
        ...

    async def get_request(self, request_id: str) -> StoredRequest:
        """The request, or `NotFound`."""
        ...

    async def request_item(self, item_id: str) -> tuple[Item, dict[str, Any] | None]:
        """A request's item and, while the item is pending, the kill switch (None when
        off), read together: what the request's state is made of, in one read where an
        agent's long-poll would take two. `NotFound` when there is no such item."""
        ...

    async def request_of_item(self, item_id: str) -> StoredRequest | None: ...

    async def request_by_key(self, requester: str, key: str) -> StoredRequest | None:
        """The request `requester` made with this idempotency key, if any."""
        ...

    async def request_timeouts(self, item_ids: Sequence[str]) -> dict[str, float]:
        """The time-outs the requests of these items set (item id → seconds)."""
        ...

    async def finish_request(
        self,
        run_id: str,
        *,
        lease: str | None,
        now: datetime,
        events: Sequence[NewEvent],
        result: str,
    ) -> Run:
        """End a request's run, DONE with `result` and `events` (no Unread note: the
        requester has its answer), only while `lease` is held."""
        ...


class Undos(Protocol):
    """The Undo of a `notify` FYI (`pizzabot.agent.undo`): taken at most once, then its
    outcome, which marks every sent copy of the item for an update."""

    async def start_undo(self, item_id: str, *, by: str, via: str, now: datetime) -> Item:
        """Take the item's offered Undo for `by`: the item, its Undo `running`. Raises
        `AlreadyUndone` (with the item) when it was taken before, `Conflict` when the item
        offers none, `NotFound`."""
        ...

    async def finish_undo(self, item_id: str, *, ok: bool, outcome: str, now: datetime) -> Item:
        """How the running Undo ended (`done`, or `failed` with the error as `outcome`)."""
        ...


class Store(RunStore, InboxItems, Outbox, AuditLog, Switches, RequestStore, Undos, Protocol):
    """Everything the engine needs from persistence."""

    async def aclose(self) -> None: ...


class ItemTimers(Protocol):
    """Reminders and escalations of pending items, each made at most once."""

    async def timers_done(self, item_ids: Sequence[str]) -> set[tuple[str, str]]:
        """(item id, kind) of the reminders and escalations already made."""
        ...

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
        """Deliver a still-pending item to `targets` and note it on its run, once per kind;
        False when already done or the item is no longer pending. With `shown`, the card
        says it among its steps so far (`Risk.steps`; its sent copies are updated), and
        `audit` (action, detail) is written by the clock, in the same transaction."""
        ...


class MailLog(Protocol):
    """Keys of handled mail (Message-IDs) and used links, shared by every server process.

    `record_once` is the once-only gate: of two processes recording one key, exactly one gets
    True.
    """

    async def record_once(self, key: str, *, kind: str, now: datetime) -> bool:
        """Record `key`; False when it was recorded before."""
        ...

    async def release(self, key: str) -> None:
        """Forget `key` (handling failed half-way and should be tried again)."""
        ...

    async def seen(self, key: str) -> bool: ...
