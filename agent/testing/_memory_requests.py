"""The memory store's requests (`RequestStore`): a request is a run of an inbox-only skill,
its events, one Action item with its deliveries (and one more on the `callback` channel for a
callback URL), and the request, written together; a requester's key finds its first request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import NewEvent
from pizzabot.agent.model import Item, ItemStatus, Run, RunStatus, Target
from pizzabot.agent.store import StoredRequest
from pizzabot.agent.testing._memory_state import MemoryBase, MemoryState, as_json, fresh

#: The channel a request's callback is delivered on (`pizzabot.channels.callback`).
CALLBACK = "callback"


def _find(s: MemoryState, requester: str, key: str) -> StoredRequest | None:
    for r in s.requests.values():
        if r.requester == requester and r.idempotency_key == key:
            return r
    return None


def _decided_at_once(s: MemoryState, item: Item, now: datetime) -> None:
    """Write the decision of an item a rule or a grant decided as it was made."""
    s.items[item.id] = replace(
        s.items[item.id],
        decided_by=item.decided_by,
        decided_via=item.decided_via,
        decided_at=item.decided_at or now,
        final_args=as_json(item.final_args),
        reason=item.reason,
    )
    s.add_audit(
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


class MemoryRequests(MemoryBase):
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
        with self.transaction() as s:
            if request.idempotency_key is not None:
                earlier = _find(s, request.requester, request.idempotency_key)
                if earlier is not None:
                    return earlier, False
            run = Run(
                id=request.run_id,
                skill=request.skill,
                status=run_status,
                input=input,
                trigger="request",
                created_at=now,
                updated_at=now,
                started_at=now,
                finished_at=now if run_status.terminal else None,
                result=result,
            )
            s.add_run(run)
            s.append(run.id, events, now)
            s.insert_item(item, targets, now)
            if item.status is not ItemStatus.PENDING:
                _decided_at_once(s, item, now)
            if request.callback_url:
                s.add_delivery(item.id, run.id, CALLBACK, request.callback_url, now)
            if request.id in s.requests:
                raise ValueError(f"request {request.id} exists already")
            s.requests[request.id] = request
            s.add_audit(
                action="request",
                actor=request.requester,
                channel="api",
                now=now,
                run_id=request.run_id,
                item_id=request.item_id,
                detail={"request": request.id, "skill": request.skill, "kind": request.kind},
            )
            return request, True

    async def get_request(self, request_id: str) -> StoredRequest:
        request = self.state.requests.get(request_id)
        if request is None:
            raise NotFound(f"no request {request_id}")
        return request

    async def request_item(self, item_id: str) -> tuple[Item, dict[str, Any] | None]:
        item = self.state.items.get(item_id)
        if item is None:
            raise NotFound(f"no item {item_id}")
        pending = item.status is ItemStatus.PENDING
        return fresh(item), fresh(self.state.kill) if pending else None

    async def request_of_item(self, item_id: str) -> StoredRequest | None:
        for r in self.state.requests.values():
            if r.item_id == item_id:
                return r
        return None

    async def request_by_key(self, requester: str, key: str) -> StoredRequest | None:
        return _find(self.state, requester, key)

    async def request_timeouts(self, item_ids: Sequence[str]) -> dict[str, float]:
        wanted = set(item_ids)
        return {
            r.item_id: float(r.timeout)
            for r in self.state.requests.values()
            if r.item_id in wanted and r.timeout is not None
        }

    async def finish_request(
        self,
        run_id: str,
        *,
        lease: str | None,
        now: datetime,
        events: Sequence[NewEvent],
        result: str,
    ) -> Run:
        with self.transaction() as s:
            s.run(run_id)
            s.held(run_id, lease)
            run = s.move(run_id, RunStatus.DONE, now, finished_at=now, result=result)
            s.append(run_id, events, now)
            s.close_pending(run_id, status=ItemStatus.CANCELLED, now=now)
            return fresh(run)
