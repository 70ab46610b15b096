"""The requests part of the store contract: every backend with a `RequestStore` behaves the
same (see conftest.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.addresses import SlackTarget
from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import DecisionMade, NewEvent, RunStarted, ToolRequest
from pizzabot.agent.model import Approve, Box, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.agent.store import (
    AuditLog,
    DeliveryReader,
    InboxItems,
    LeaseLost,
    RequestStore,
    RunStore,
    StoredRequest,
    Switches,
)
from tests.contract.helpers import claim_one

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def _request(n: int = 1, *, key: str | None = None, requester: str = "owner") -> StoredRequest:
    return StoredRequest(
        id=f"q{n}",
        run_id=f"r{n}",
        item_id=f"i{n}",
        skill="deploys",
        kind="approval",
        requester=requester,
        idempotency_key=key,
        body_hash="h" * 64,
        callback_url="https://agent.example/callback",
        timeout=60.0 if n == 1 else None,
        created_at=T0,
    )


def _item(request: StoredRequest) -> Item:
    return Item(
        id=request.item_id,
        run_id=request.run_id,
        skill=request.skill,
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="Deploy",
        body="",
        created_at=T0,
        call_id="request",
        tool="deploy.prod",
        args={"env": "prod"},
        secret="s",
    )


async def _create(
    requests: RequestStore, request: StoredRequest, item: Item | None = None
) -> tuple[StoredRequest, bool]:
    item = item or _item(request)
    events = [
        NewEvent(RunStarted(input="Deploy", trigger="request", by=request.requester)),
        NewEvent(ToolRequest(call_id="request", item_id=item.id, tool="deploy.prod")),
    ]
    return await requests.create_request(
        request,
        input="Deploy",
        item=item,
        events=events,
        targets=[SlackTarget("C1")] if item.status is ItemStatus.PENDING else [],
        run_status=RunStatus.WAITING if item.status is ItemStatus.PENDING else RunStatus.DONE,
        result=None if item.status is ItemStatus.PENDING else "approved by rule 1",
    )


async def test_a_request_is_a_waiting_run_with_its_item_deliveries_and_callback(
    requests: RequestStore,
    runs: RunStore,
    items: InboxItems,
    outbox: DeliveryReader,
    audit: AuditLog,
) -> None:
    request, created = await _create(requests, _request())
    assert created and await requests.get_request("q1") == request
    assert await requests.request_of_item("i1") == request
    assert await requests.request_of_item("nope") is None
    with pytest.raises(NotFound):
        await requests.get_request("nope")
    run = await runs.get_run("r1")
    assert (run.status, run.trigger, run.input) == (RunStatus.WAITING, "request", "Deploy")
    assert [e.kind for e in await runs.events("r1")] == ["run_started", "tool_request"]
    assert (await items.get_item("i1")).status is ItemStatus.PENDING
    deliveries = {(d.channel, d.address) for d in await outbox.deliveries("i1")}
    assert deliveries == {("slack", "C1"), ("callback", "https://agent.example/callback")}
    assert await requests.request_timeouts(["i1", "i2"]) == {"i1": 60.0}
    assert "request" in [a.action for a in await audit.audit_log()]


async def test_a_requests_item_is_read_with_the_kill_switch_while_it_is_pending(
    requests: RequestStore, items: InboxItems, switches: Switches
) -> None:
    await _create(requests, _request())
    assert await requests.request_item("i1") == (await items.get_item("i1"), None)
    await switches.set_kill(on=True, actor="ops", now=T0, reason="audit")
    item, kill = await requests.request_item("i1")
    assert item.status is ItemStatus.PENDING
    assert kill is not None and (kill["by"], kill["reason"]) == ("ops", "audit")
    # Decided, the switch no longer matters to the request's state.
    await items.record_decision(
        "i1", Approve(), actor="u", channel="web", now=T0, final_args=None,
        event=NewEvent(DecisionMade(item_id="i1", decision=Approve())),
    )  # fmt: skip
    item, kill = await requests.request_item("i1")
    assert (item.status, item.decided_by, kill) == (ItemStatus.APPROVED, "u", None)
    with pytest.raises(NotFound):
        await requests.request_item("nope")


async def test_a_requesters_key_finds_its_first_request(
    requests: RequestStore, runs: RunStore
) -> None:
    first, _ = await _create(requests, _request(1, key="k"))
    again, created = await _create(requests, _request(2, key="k"))
    assert not created and again == first
    with pytest.raises(NotFound):
        await runs.get_run("r2")  # nothing of the repeat was written
    # Another requester's key is its own.
    other, created = await _create(requests, _request(3, key="k", requester="mcp"))
    assert created and other.id == "q3"
    assert await requests.request_by_key("owner", "k") == first
    assert await requests.request_by_key("mcp", "k") == other
    assert await requests.request_by_key("owner", "other") is None


async def test_concurrent_requests_with_one_key_make_one(
    requests: RequestStore, runs: RunStore
) -> None:
    made = await asyncio.gather(*[_create(requests, _request(n, key="same")) for n in range(1, 7)])
    assert sum(created for _, created in made) == 1
    assert len({r.id for r, _ in made}) == 1
    assert len(await runs.list_runs()) == 1


async def test_a_request_decided_at_once_is_a_finished_run(
    requests: RequestStore, runs: RunStore, items: InboxItems, audit: AuditLog
) -> None:
    request = _request(2)
    item = replace(
        _item(request),
        status=ItemStatus.APPROVED,
        decided_by="rule 1 of deploy.prod",
        decided_via="policy",
        decided_at=T0,
        final_args={"env": "prod"},
    )
    await _create(requests, request, item)
    run = await runs.get_run("r2")
    assert (run.status, run.result, run.finished_at) == (RunStatus.DONE, "approved by rule 1", T0)
    stored = await items.get_item("i2")
    assert (stored.status, stored.decided_by, stored.decided_via, stored.final_args) == (
        ItemStatus.APPROVED,
        "rule 1 of deploy.prod",
        "policy",
        {"env": "prod"},
    )
    (decision,) = [a for a in await audit.audit_log() if a.action == "decision"]
    assert (decision.actor, decision.channel, decision.item_id) == (
        "rule 1 of deploy.prod",
        "policy",
        "i2",
    )
    # Nothing to claim: it ended as it was made.
    assert await claim_one(runs, lease="w", now=T0, lease_seconds=30) is None


async def test_finishing_a_request_is_fenced_and_makes_no_unread_note(
    requests: RequestStore, runs: RunStore, items: InboxItems
) -> None:
    await _create(requests, _request())
    await runs.requeue("r1", now=T0)
    claimed = await claim_one(runs, lease="w1", now=T0, lease_seconds=30)
    assert claimed is not None and claimed.id == "r1"
    with pytest.raises(LeaseLost):
        await requests.finish_request("r1", lease="w2", now=T0, events=[], result="x")
    later = T0 + timedelta(seconds=1)
    run = await requests.finish_request("r1", lease="w1", now=later, events=[], result="approved")
    assert (run.status, run.result, run.finished_at) == (RunStatus.DONE, "approved", later)
    assert await items.list_items(box=Box.UNREAD) == []
    # A pending item of a run that ends is closed.
    assert (await items.get_item("i1")).status is ItemStatus.CANCELLED
