"""Requests in SQL: a request from an agent Pizza Bot does not run is written as a run of an
inbox-only skill, its events, one Action item with its deliveries, and the request row, all
in one transaction; its run ends without an Unread note (the requester has its answer).

A callback URL is one more delivery of the item, on the `callback` channel: the outbox posts
the decision there when the item's copies are updated, and retries it like any delivery.
Implements `pizzabot.agent.store.RequestStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, cast

from sqlalchemy import Connection, Table, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pizzabot.agent.context import new_id
from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import NewEvent
from pizzabot.agent.model import (
    DeliveryStatus,
    Item,
    ItemStatus,
    Run,
    RunStatus,
    Target,
    transition,
)
from pizzabot.agent.store import LeaseLost, StoredRequest
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database, orm
from pizzabot.store.events import append_events, run_of
from pizzabot.store.inbox import close_pending, insert_item, read_item
from pizzabot.store.switches import kill_switch
from pizzabot.store.tables import DeliveryRow, ItemRow, RunRow
from pizzabot.store.tables_requests import RequestRow

REQUESTS = cast(Table, RequestRow.__table__)

#: The channel a request's callback is delivered on (`pizzabot.channels.callback`).
CALLBACK = "callback"


def _request(row: Any) -> StoredRequest:
    kind: Literal["approval", "question"] = "question" if row.kind == "question" else "approval"
    return StoredRequest(
        id=row.id,
        run_id=row.run_id,
        item_id=row.item_id,
        skill=row.skill,
        kind=kind,
        requester=row.requester,
        idempotency_key=row.idempotency_key,
        body_hash=row.body_hash,
        callback_url=row.callback_url,
        timeout=row.timeout,
        created_at=row.created_at,
    )


def _find(c: Connection, requester: str, key: str) -> StoredRequest | None:
    row = c.execute(
        select(REQUESTS).where(REQUESTS.c.requester == requester, REQUESTS.c.idempotency_key == key)
    ).first()
    return _request(row) if row is not None else None


def _decided_at_once(s: Session, item: Item, now: datetime) -> None:
    """Write the decision of an item a rule or a grant decided as it was made."""
    row = s.get(ItemRow, item.id)
    assert row is not None
    row.decided_by = item.decided_by
    row.decided_via = item.decided_via
    row.decided_at = item.decided_at or now
    row.final_args = item.final_args
    row.reason = item.reason
    insert_audit(
        s.connection(),
        action="decision",
        actor=item.decided_by or "policy",
        channel=item.decided_via or "policy",
        now=now,
        run_id=item.run_id,
        item_id=item.id,
        detail={
            "decision": "approve" if item.status is ItemStatus.APPROVED else "reject",
            "status": item.status.value,
            "args_before": item.args,
            "args_after": item.final_args,
            "reason": item.reason,
        },
    )


class SqlRequests:
    def __init__(self, db: Database) -> None:
        self.db = db

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
        now = request.created_at

        def tx(s: Session) -> tuple[StoredRequest, bool]:
            if request.idempotency_key is not None:
                earlier = _find(s.connection(), request.requester, request.idempotency_key)
                if earlier is not None:
                    return earlier, False
            s.add(self._run_row(request, input, run_status, result, now))
            s.flush()
            append_events(s.connection(), request.run_id, events, now)
            insert_item(s.connection(), item, targets, now)
            if item.status is not ItemStatus.PENDING:
                _decided_at_once(s, item, now)
            if request.callback_url:
                s.add(self._callback(request, now))
            s.add(self._request_row(request))
            insert_audit(
                s.connection(),
                action="request",
                actor=request.requester,
                channel="api",
                now=now,
                run_id=request.run_id,
                item_id=request.item_id,
                detail={"request": request.id, "skill": request.skill, "kind": request.kind},
            )
            return request, True

        try:
            return await self.db.run(orm(tx))
        except IntegrityError:
            # Another process took the same key a moment earlier: its request is the one.
            if request.idempotency_key is None:
                raise
            key = request.idempotency_key

            def again(c: Connection) -> StoredRequest | None:
                return _find(c, request.requester, key)

            earlier = await self.db.run(again)
            if earlier is None:
                raise
            return earlier, False

    @staticmethod
    def _run_row(
        request: StoredRequest, input: str, status: RunStatus, result: str | None, now: datetime
    ) -> RunRow:
        return RunRow(
            id=request.run_id,
            skill=request.skill,
            status=status.value,
            input=input,
            trigger="request",
            created_at=now,
            updated_at=now,
            started_at=now,
            finished_at=now if status.terminal else None,
            result=result,
            tokens=0,
            cost_usd=0.0,
            steps=0,
            cost_known=True,
            budget_extra={},
            last_seq=0,
        )

    @staticmethod
    def _callback(request: StoredRequest, now: datetime) -> DeliveryRow:
        # Sent (a no-op) at once; the decision marks it for an update, which posts it.
        return DeliveryRow(
            id=new_id(),
            item_id=request.item_id,
            run_id=request.run_id,
            channel=CALLBACK,
            address=request.callback_url,
            status=DeliveryStatus.PENDING.value,
            attempts=0,
            needs_update=False,
            created_at=now,
            updated_at=now,
        )

    @staticmethod
    def _request_row(request: StoredRequest) -> RequestRow:
        return RequestRow(
            id=request.id,
            run_id=request.run_id,
            item_id=request.item_id,
            skill=request.skill,
            kind=request.kind,
            requester=request.requester,
            idempotency_key=request.idempotency_key,
            body_hash=request.body_hash,
            callback_url=request.callback_url,
            timeout=request.timeout,
            created_at=request.created_at,
        )

    async def get_request(self, request_id: str) -> StoredRequest:
        def tx(c: Connection) -> StoredRequest:
            row = c.execute(select(REQUESTS).where(REQUESTS.c.id == request_id)).first()
            if row is None:
                raise NotFound(f"no request {request_id}")
            return _request(row)

        return await self.db.read(tx)

    async def request_item(self, item_id: str) -> tuple[Item, dict[str, Any] | None]:
        def tx(c: Connection) -> tuple[Item, dict[str, Any] | None]:
            item = read_item(c, item_id)
            return item, kill_switch(c) if item.status is ItemStatus.PENDING else None

        return await self.db.read(tx)

    async def request_of_item(self, item_id: str) -> StoredRequest | None:
        def tx(c: Connection) -> StoredRequest | None:
            row = c.execute(select(REQUESTS).where(REQUESTS.c.item_id == item_id)).first()
            return _request(row) if row is not None else None

        return await self.db.run(tx)

    async def request_by_key(self, requester: str, key: str) -> StoredRequest | None:
        def tx(c: Connection) -> StoredRequest | None:
            return _find(c, requester, key)

        return await self.db.run(tx)

    async def request_timeouts(self, item_ids: Sequence[str]) -> dict[str, float]:
        if not item_ids:
            return {}
        q = select(REQUESTS.c.item_id, REQUESTS.c.timeout).where(
            REQUESTS.c.item_id.in_(list(item_ids)), REQUESTS.c.timeout.is_not(None)
        )

        def tx(c: Connection) -> dict[str, float]:
            return {row.item_id: float(row.timeout) for row in c.execute(q)}

        return await self.db.run(tx)

    async def finish_request(
        self,
        run_id: str,
        *,
        lease: str | None,
        now: datetime,
        events: Sequence[NewEvent],
        result: str,
    ) -> Run:
        def tx(s: Session) -> Run:
            row = s.get(RunRow, run_id, with_for_update=self.db.is_postgres)
            if row is None:
                raise NotFound(f"no run {run_id}")
            if lease is not None and (
                row.lease_owner != lease or row.status != RunStatus.RUNNING.value
            ):
                raise LeaseLost(run_id)
            transition(RunStatus(row.status), RunStatus.DONE)
            row.status = RunStatus.DONE.value
            row.updated_at = row.finished_at = now
            row.lease_owner = row.lease_expires_at = None
            row.result = result
            s.flush()
            append_events(s.connection(), run_id, events, now)
            close_pending(s.connection(), run_id, status=ItemStatus.CANCELLED, now=now)
            return run_of(row)

        return await self.db.run(orm(tx))
