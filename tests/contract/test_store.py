"""The store contract: every backend (SQLite, PostgreSQL, the memory store) behaves the same.

Each test asks for the roles it uses (see conftest.py) and runs on every backend that has them.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.addresses import EmailTarget, SlackRef, SlackTarget
from pizzabot.agent.errors import AlreadyDecided, NotFound
from pizzabot.agent.events import (
    DecisionMade,
    NewEvent,
    Note,
    RunFinished,
    RunStarted,
    ToolRequest,
    ToolStarted,
)
from pizzabot.agent.model import (
    Approve,
    Box,
    Decision,
    DeliveryStatus,
    Edit,
    EventKind,
    IllegalTransition,
    Item,
    ItemKind,
    ItemStatus,
    Reject,
    Run,
    RunStatus,
    Target,
    Usage,
)
from pizzabot.agent.store import AuditLog, InboxItems, LeaseLost, Outbox, RunStore, Switches
from tests.contract.helpers import Hand, claim_one

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


async def _run(
    runs: RunStore,
    run_id: str = "r1",
    *,
    idempotency_key: str | None = None,
) -> Run:
    return await runs.create_run(
        run_id=run_id,
        skill="s",
        input="hi",
        trigger="test",
        now=T0,
        events=[NewEvent(RunStarted(input="hi"))],
        idempotency_key=idempotency_key,
    )


async def _approve(items: InboxItems, *, now: datetime) -> Item:
    """Item i1 approved through the API, as `Inbox.decide` records it."""
    return await items.record_decision(
        "i1",
        Approve(),
        actor="u",
        channel="api",
        now=now,
        final_args=None,
        event=NewEvent(DecisionMade(item_id="i1", decision=Approve())),
    )


def _item(item_id: str = "i1", run_id: str = "r1") -> Item:
    return Item(
        id=item_id,
        run_id=run_id,
        skill="s",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="t",
        body="b",
        created_at=T0,
        call_id="c1",
        tool="crm.send",
        args={"to": "a"},
        schema={"type": "object"},
        secret="sekret",
    )


def _unread(item_id: str, *, at: datetime, body: str = "") -> Item:
    """Run r1's Unread note, as a run's end writes it."""
    return Item(
        id=item_id,
        run_id="r1",
        skill="s",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="done",
        body=body,
        created_at=at,
    )


async def test_a_new_run_is_queued_with_its_first_event(runs: RunStore) -> None:
    await _run(runs)
    run = await runs.get_run("r1")
    assert run.status is RunStatus.QUEUED and run.created_at == T0
    events = await runs.events("r1")
    assert [(e.seq, e.kind) for e in events] == [(1, EventKind.RUN_STARTED)]
    with pytest.raises(NotFound):
        await runs.get_run("nope")


async def test_idempotency_key_returns_the_earlier_run(runs: RunStore) -> None:
    await _run(runs, "r1", idempotency_key="k")
    await _run(runs, "r2", idempotency_key="k")
    assert [r.id for r in await runs.list_runs()] == ["r1"]


async def test_a_run_is_claimed_once_and_its_lease_fences_writes(runs: RunStore) -> None:
    await _run(runs)
    run = await claim_one(runs, lease="w1", now=T0, lease_seconds=30)
    assert run is not None and run.status is RunStatus.RUNNING and run.lease_owner == "w1"
    assert await claim_one(runs, lease="w2", now=T0, lease_seconds=30) is None
    with pytest.raises(LeaseLost):
        await runs.append_events("r1", [NewEvent(Note())], lease="w2", now=T0)
    # The lease expires: another worker takes the run over, and the first may no longer write.
    later = T0 + timedelta(seconds=31)
    taken = await claim_one(runs, lease="w2", now=later, lease_seconds=30)
    assert taken is not None and taken.lease_owner == "w2"
    with pytest.raises(LeaseLost):
        await runs.renew_lease("r1", lease="w1", now=later, lease_seconds=30)
    await runs.append_events("r1", [NewEvent(Note())], lease="w2", now=later)
    assert [e.seq for e in await runs.events("r1")] == [1, 2]


async def test_concurrent_claims_never_hand_one_run_to_two_workers(runs: RunStore) -> None:
    for i in range(6):
        await _run(runs, f"r{i}")
    claims = await asyncio.gather(
        *[claim_one(runs, lease=f"w{i}", now=T0, lease_seconds=30) for i in range(12)]
    )
    ids = [c.id for c in claims if c is not None]
    assert sorted(ids) == [f"r{i}" for i in range(6)]


async def test_a_batch_claim_takes_the_oldest_runs_each_once_with_their_logs(
    runs: RunStore,
) -> None:
    for i in range(7):
        await runs.create_run(
            run_id=f"r{i}",
            skill="s",
            input="hi",
            trigger="test",
            now=T0 + timedelta(seconds=i),
            events=[NewEvent(RunStarted(input=f"job {i}"))],
        )
    batches = await asyncio.gather(
        *[runs.claim_runs(lease=f"w{i}", now=T0, lease_seconds=30, limit=3) for i in range(4)]
    )
    claimed = [c.run.id for batch in batches for c in batch]
    assert sorted(claimed) == [f"r{i}" for i in range(7)]
    for batch in batches:
        held = [c.run for c in batch]
        # Oldest first within a batch, each run held by the worker that claimed it.
        assert [r.created_at for r in held] == sorted(r.created_at for r in held)
        assert len({r.lease_owner for r in held}) <= 1
        # Each comes with its own log, read in the claim's transaction.
        for c in batch:
            assert [(e.run_id, e.seq, e.data["input"]) for e in c.events] == [
                (c.run.id, 1, f"job {c.run.id[1:]}")
            ]
    # An empty queue gives fewer than asked for: none.
    assert await runs.claim_runs(lease="w9", now=T0, lease_seconds=30, limit=3) == []


async def test_a_decided_run_is_claimed_before_runs_made_after_it(
    runs: RunStore, items: InboxItems
) -> None:
    # r1 waits on a decision; r2 is queued meanwhile; the decision then queues r1 again.
    await _run(runs, "r1")
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    await items.create_item(_item(), targets=[], lease="w", now=T0, run_status=RunStatus.WAITING)
    later = T0 + timedelta(minutes=5)
    await runs.create_run(run_id="r2", skill="s", input="hi", trigger="test", now=later)
    await _approve(items, now=later + timedelta(minutes=5))
    # The oldest run first: the person who answered does not wait behind newer work.
    claimed = await runs.claim_runs(lease="w2", now=later, lease_seconds=30, limit=1)
    assert [c.run.id for c in claimed] == ["r1"]


async def test_a_decision_hands_its_waiting_run_to_the_installed_worker(
    runs: RunStore, items: InboxItems
) -> None:
    # The decision's transaction claims the run for the worker's lease, with its log: no
    # other worker ever finds it queued.
    await _run(runs, "r1")
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    await items.create_item(_item(), targets=[], lease="w", now=T0, run_status=RunStatus.WAITING)
    hand = Hand("w2")
    items.hand_over_to(hand)
    await _approve(items, now=T0)
    [claimed] = hand.started
    run = await runs.get_run("r1")
    assert (run.status, run.lease_owner) == (RunStatus.RUNNING, "w2#1")
    assert claimed.events == await runs.events("r1")
    assert isinstance(claimed.events[-1].payload, DecisionMade)
    assert hand.woken == 0
    assert await runs.claim_runs(lease="w3", now=T0, lease_seconds=30, limit=5) == []


async def test_a_decision_takes_no_run_that_is_not_waiting_nor_any_while_killed(
    runs: RunStore, items: InboxItems, switches: Switches
) -> None:
    await _run(runs, "r1")
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    two = [_item("i1"), _item("i2")]
    await items.create_items([(i, []) for i in two], targets=[], lease="w", now=T0)
    hand = Hand("w2")
    items.hand_over_to(hand)
    # r1 is still running under "w" (a turn's later card decided early): it stays w's.
    event = NewEvent(DecisionMade(item_id="i1", decision=Approve()))
    await items.record_decision(
        "i1", Approve(), actor="u", channel="api", now=T0, final_args=None, event=event
    )
    assert (hand.started, hand.woken) == ([], 1)
    assert (await runs.get_run("r1")).lease_owner == "w"
    # Waiting, with the kill switch on: queued as before, not taken.
    await runs.set_status("r1", RunStatus.WAITING, lease="w", now=T0)
    await switches.set_kill(on=True, actor="ops", now=T0)
    event = NewEvent(DecisionMade(item_id="i2", decision=Approve()))
    await items.record_decision(
        "i2", Approve(), actor="u", channel="api", now=T0, final_args=None, event=event
    )
    assert (hand.started, hand.woken) == ([], 2)
    assert (await runs.get_run("r1")).status is RunStatus.QUEUED


async def test_a_new_run_is_taken_by_the_installed_worker_unless_killed(
    runs: RunStore, switches: Switches
) -> None:
    # The creating transaction claims the run, with its first event: no other worker ever
    # finds it queued, and no wake-up is needed.
    hand = Hand("w1")
    runs.hand_over_to(hand)
    await _run(runs, "r1")
    [claimed] = hand.started
    run = await runs.get_run("r1")
    assert (run.status, run.lease_owner, run.started_at) == (RunStatus.RUNNING, "w1#1", T0)
    assert claimed.events == await runs.events("r1")
    assert await runs.claim_runs(lease="w2", now=T0, lease_seconds=30, limit=5) == []
    # With the kill switch on it queues like any new run, for when the switch goes off.
    await switches.set_kill(on=True, actor="ops", now=T0)
    await _run(runs, "r2")
    assert (len(hand.started), hand.woken) == (1, 1)
    assert (await runs.get_run("r2")).status is RunStatus.QUEUED
    # Uninstalled, nothing is offered: the run queues for any worker.
    runs.hand_over_to(None)
    await switches.set_kill(on=False, actor="ops", now=T0)
    await _run(runs, "r3")
    assert (hand.offered, (await runs.get_run("r3")).status) == (2, RunStatus.QUEUED)


async def test_illegal_transitions_are_refused(runs: RunStore) -> None:
    await _run(runs)
    with pytest.raises(IllegalTransition):
        await runs.set_status("r1", RunStatus.WAITING, lease=None, now=T0)


async def test_an_item_is_written_with_its_deliveries_and_moves_the_run(
    runs: RunStore, items: InboxItems, outbox: Outbox
) -> None:
    await _run(runs)
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    await items.create_item(
        _item(),
        targets=[SlackTarget("C1"), EmailTarget("a@x")],
        lease="w",
        now=T0,
        run_status=RunStatus.WAITING,
        events=[NewEvent(ToolRequest(call_id="c1", item_id="i1"))],
    )
    assert (await runs.get_run("r1")).status is RunStatus.WAITING
    got = await items.get_item("i1")
    assert got.args == {"to": "a"} and got.secret == "sekret"
    assert [d.channel for d in await outbox.deliveries("i1")] == ["slack", "email"]
    assert [i.id for i in await items.list_items(box=Box.ACTION)] == ["i1"]


async def test_the_first_decision_wins(runs: RunStore, items: InboxItems, audit: AuditLog) -> None:
    await _run(runs)
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    await items.create_item(_item(), targets=[], lease="w", now=T0, run_status=RunStatus.WAITING)
    decisions: list[Decision] = [Approve(), Edit({"to": "b"}), Reject("no"), Approve(), Reject("x")]
    results = await asyncio.gather(
        *[
            items.record_decision(
                "i1",
                d,
                actor=f"u{n}",
                channel="api",
                now=T0,
                final_args=None,
                event=NewEvent(DecisionMade(item_id="i1", decision=d)),
            )
            for n, d in enumerate(decisions)
        ],
        return_exceptions=True,
    )
    winners = [r for r in results if isinstance(r, Item)]
    losers = [r for r in results if isinstance(r, AlreadyDecided)]
    assert len(winners) == 1 and len(losers) == 4
    assert all(loser.item.decided_by == winners[0].decided_by for loser in losers)
    assert (await runs.get_run("r1")).status is RunStatus.QUEUED
    assert sum(e.kind is EventKind.DECISION for e in await runs.events("r1")) == 1
    assert [a.action for a in await audit.audit_log()] == ["decision"]


async def test_the_outbox_retries_and_marks_copies_for_update(
    runs: RunStore, items: InboxItems, outbox: Outbox
) -> None:
    await _run(runs)
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    await items.create_item(
        _item(), targets=[SlackTarget("C1")], lease="w", now=T0, run_status=RunStatus.WAITING
    )
    (d,) = await outbox.due_deliveries(now=T0)
    await outbox.delivery_failed(d.id, error="down", retry_at=T0 + timedelta(seconds=10), now=T0)
    assert await outbox.due_deliveries(now=T0 + timedelta(seconds=5)) == []
    (d,) = await outbox.due_deliveries(now=T0 + timedelta(seconds=10))
    assert d.attempts == 1 and d.last_error == "down"
    sent = SlackRef(channel="C1", ts="123.45", thread_ts="123.45")
    await outbox.delivery_sent(d.id, ref=sent, now=T0)
    assert await outbox.due_deliveries(now=T0) == []
    found = await outbox.find_delivery("slack", "123.45")
    assert found is not None and found.ref == sent
    await _approve(items, now=T0)
    (d,) = await outbox.due_deliveries(now=T0)
    assert d.needs_update and d.status is DeliveryStatus.SENT
    await outbox.delivery_updated(d.id, now=T0)
    assert await outbox.due_deliveries(now=T0) == []


async def test_the_outbox_reads_a_lane_and_gives_up_with_an_audit_entry(
    runs: RunStore, items: InboxItems, outbox: Outbox, audit: AuditLog
) -> None:
    await _run(runs)
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    targets: list[Target] = [SlackTarget("C1"), SlackTarget("C2"), EmailTarget("a@example.test")]
    await items.create_item(
        _item(), targets=targets, lease="w", now=T0, run_status=RunStatus.WAITING
    )
    # One item's deliveries share a creation time: their order among themselves is open.
    slack = await outbox.due_deliveries(now=T0, channels=["slack"])
    assert {d.address for d in slack} == {"C1", "C2"}
    others = await outbox.due_deliveries(now=T0, except_channels=["slack"])
    assert [d.address for d in others] == ["a@example.test"]
    rest = await outbox.due_deliveries(now=T0, channels=["slack"], skip=[slack[0].id])
    assert [d.id for d in rest] == [slack[1].id]

    await outbox.delivery_failed(slack[0].id, error="down", retry_at=None, now=T0)
    later = await outbox.due_deliveries(now=T0 + timedelta(days=1))
    assert {d.id for d in later} == {slack[1].id, others[0].id}
    (dead,) = [d for d in await outbox.deliveries("i1") if d.id == slack[0].id]
    assert (dead.status, dead.attempts, dead.last_error) == (DeliveryStatus.FAILED, 1, "down")
    (entry,) = await audit.audit_log()
    assert (entry.action, entry.actor, entry.channel, entry.item_id) == (
        "delivery_dead",
        "outbox",
        "slack",
        "i1",
    )
    assert entry.detail == {"delivery_id": dead.id, "attempts": 1, "error": "down"}


async def test_the_channels_with_work_are_those_with_a_copy_to_send_or_update(
    runs: RunStore, items: InboxItems, outbox: Outbox
) -> None:
    assert await outbox.channels_with_work() == set()
    await _run(runs)
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    targets: list[Target] = [SlackTarget("C1"), EmailTarget("a@example.test")]
    await items.create_item(
        _item(), targets=targets, lease="w", now=T0, run_status=RunStatus.WAITING
    )
    assert await outbox.channels_with_work() == {"slack", "email"}
    slack, mail = sorted(await outbox.deliveries("i1"), key=lambda d: d.channel != "slack")
    # Waiting out a backoff is still work, only not due yet.
    await outbox.delivery_failed(mail.id, error="down", retry_at=T0 + timedelta(hours=1), now=T0)
    await outbox.delivery_sent(
        slack.id, ref=SlackRef(channel="C1", ts="1.5", thread_ts="1.5"), now=T0
    )
    assert await outbox.channels_with_work() == {"email"}
    await outbox.delivery_sent(mail.id, ref=None, now=T0)
    assert await outbox.channels_with_work() == set()
    await _approve(items, now=T0)
    assert await outbox.channels_with_work() == {"slack", "email"}  # both copies to update


async def test_closing_a_runs_items_and_reading_unread(
    runs: RunStore, items: InboxItems, outbox: Outbox
) -> None:
    await _run(runs)
    await claim_one(runs, lease="w", now=T0, lease_seconds=30)
    await items.create_item(
        _item(), targets=[SlackTarget("C1")], lease="w", now=T0, run_status=RunStatus.WAITING
    )
    (copy,) = await outbox.deliveries("i1")
    await outbox.delivery_sent(
        copy.id, ref=SlackRef(channel="C1", ts="1.5", thread_ts="1.5"), now=T0
    )
    note = _unread("u1", at=T0)
    # A run's end closes its pending actions, and writes its Unread note, in one go.
    later = T0 + timedelta(minutes=1)
    finished = NewEvent(RunFinished(status=RunStatus.CANCELLED))
    run = await runs.finish_run(
        "r1", RunStatus.CANCELLED, lease=None, now=later, events=[finished], unread=note, targets=[]
    )
    assert (run.status, run.finished_at, run.lease_owner) == (RunStatus.CANCELLED, later, None)
    assert (await runs.events("r1"))[-1].kind is EventKind.RUN_FINISHED
    closed = await items.get_item("i1")
    assert (closed.status, closed.decided_at) == (ItemStatus.CANCELLED, later)
    (copy,) = await outbox.due_deliveries(now=later)  # its sent copy is to show it
    assert copy.needs_update
    assert [i.id for i in await items.list_items(box=Box.UNREAD)] == ["u1"]
    read = await items.mark_read("u1", now=T0)
    assert read.status is ItemStatus.READ and read.read_at == T0


async def test_a_workers_end_of_a_run_is_fenced_by_its_lease_and_writes_all_or_nothing(
    runs: RunStore, items: InboxItems
) -> None:
    await _run(runs)
    await claim_one(runs, lease="w1", now=T0, lease_seconds=30)
    later = T0 + timedelta(minutes=1)

    def note(item_id: str) -> Item:
        return _unread(item_id, at=later, body="the answer")

    finished = NewEvent(RunFinished(status=RunStatus.DONE))
    usage = Usage(tokens=12, cost_usd=0.5, steps=2, cost_known=True)
    # A worker whose lease was taken over writes nothing: no status, no event, no note.
    with pytest.raises(LeaseLost):
        await runs.finish_run(
            "r1",
            RunStatus.DONE,
            lease="w2",
            now=later,
            events=[finished],
            unread=note("u0"),
            targets=[],
            result="the answer",
            usage=usage,
        )
    run = await runs.get_run("r1")
    assert (run.status, run.lease_owner) == (RunStatus.RUNNING, "w1")
    assert [e.kind for e in await runs.events("r1")] == [EventKind.RUN_STARTED]
    assert await items.list_items(box=Box.UNREAD) == []
    with pytest.raises(NotFound):
        await runs.finish_run(
            "nope",
            RunStatus.DONE,
            lease="w1",
            now=later,
            events=[],
            unread=note("u0"),
            targets=[],
        )

    run = await runs.finish_run(
        "r1",
        RunStatus.DONE,
        lease="w1",
        now=later,
        events=[finished],
        unread=note("u1"),
        targets=[SlackTarget("C1")],
        result="the answer",
        usage=usage,
    )
    assert (run.status, run.result, run.error, run.finished_at) == (
        RunStatus.DONE,
        "the answer",
        None,
        later,
    )
    assert (run.lease_owner, run.lease_expires_at, run.usage) == (None, None, usage)
    assert await runs.get_run("r1") == run
    assert [i.id for i in await items.list_items(box=Box.UNREAD)] == ["u1"]
    # An ended run is not ended again.
    with pytest.raises(IllegalTransition):
        await runs.finish_run(
            "r1",
            RunStatus.FAILED,
            lease=None,
            now=later,
            events=[],
            unread=note("u2"),
            targets=[],
            error="late",
        )
    assert (await runs.get_run("r1")).status is RunStatus.DONE


async def test_the_kill_switch_is_kept(switches: Switches) -> None:
    assert await switches.get_kill() is None
    await switches.set_kill(on=True, actor="me", now=T0)
    assert (await switches.get_kill() or {})["by"] == "me"
    await switches.set_kill(on=False, actor="me", now=T0)
    assert await switches.get_kill() is None


async def test_no_run_is_claimed_while_the_kill_switch_is_on(
    runs: RunStore, switches: Switches
) -> None:
    await _run(runs)
    await switches.set_kill(on=True, actor="me", now=T0)
    assert await claim_one(runs, lease="w1", now=T0, lease_seconds=30) is None
    await switches.set_kill(on=False, actor="me", now=T0)
    claimed = await claim_one(runs, lease="w1", now=T0, lease_seconds=30)
    assert claimed is not None and claimed.id == "r1"


async def test_concurrent_appends_to_one_run_take_consecutive_numbers(runs: RunStore) -> None:
    await _run(runs)
    appended = await asyncio.gather(
        *[runs.append_events("r1", [NewEvent(Note())] * 2, lease=None, now=T0) for i in range(8)]
    )
    # Each append's events are numbered together, and no number is taken twice or skipped.
    for batch in appended:
        assert batch[1].seq == batch[0].seq + 1
    assert [e.seq for e in await runs.events("r1")] == list(range(1, 18))
    with pytest.raises(NotFound):
        await runs.append_events("nope", [NewEvent(Note())], lease=None, now=T0)


async def test_an_append_writes_its_events_as_given_with_the_usage_or_nothing(
    runs: RunStore,
) -> None:
    await _run(runs)
    await claim_one(runs, lease="w1", now=T0, lease_seconds=30)
    args = {"to": "zoë@example.com", "lines": ["a", {"b": None}], "n": 1.5, "q": 'say "hi"\\n'}
    events = [
        NewEvent(ToolStarted(call_id="c1", tool="crm.send", args=args)),
        NewEvent(Note()),
    ]
    later = T0 + timedelta(seconds=1)
    usage = Usage(tokens=42, cost_usd=0.25, steps=1, cost_known=False)
    appended = await runs.append_events("r1", events, lease="w1", now=later, usage=usage)
    assert [e.seq for e in appended] == [2, 3]
    read = await runs.events("r1")
    assert [(e.seq, e.kind, e.data, e.at) for e in read[1:]] == [
        (2, EventKind.TOOL_STARTED, events[0].data, later),
        (3, EventKind.NOTE, {}, later),
    ]
    assert read[1].data["args"] == args
    run = await runs.get_run("r1")
    assert run.usage == usage and run.updated_at == later
    # A writer whose lease is gone writes nothing: no event, no usage.
    with pytest.raises(LeaseLost):
        await runs.append_events(
            "r1", events, lease="w2", now=later, usage=Usage(tokens=1, steps=9)
        )
    assert len(await runs.events("r1")) == 3
    assert (await runs.get_run("r1")).usage == usage
