"""The run store's contract beyond claims: leases renewed, budgets, statuses, follow-ups,
usage, and the audit trail; on every backend (see conftest.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.events import BudgetExtended, NewEvent, Note, RunStarted, UserMessage
from pizzabot.agent.model import EventKind, IllegalTransition, RunStatus, Usage
from pizzabot.agent.store import AuditLog, LeaseLost, RunStore
from tests.contract.helpers import Hand, claim_one

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


async def _run(runs: RunStore, run_id: str = "r1", *, skill: str = "s", now: datetime = T0) -> None:
    await runs.create_run(
        run_id=run_id,
        skill=skill,
        input="hi",
        trigger="test",
        now=now,
        events=[NewEvent(RunStarted(input="hi"))],
    )


async def test_a_reused_idempotency_key_writes_nothing_and_hands_nothing_over(
    runs: RunStore,
) -> None:
    hand = Hand("w")
    runs.hand_over_to(hand)
    first = await runs.create_run(
        run_id="r1",
        skill="s",
        input="hi",
        trigger="t",
        now=T0,
        idempotency_key="k",
        events=[NewEvent(RunStarted(input="hi")), NewEvent(Note())],
    )
    again = await runs.create_run(
        run_id="r2",
        skill="s",
        input="hi",
        trigger="t",
        now=T0,
        idempotency_key="k",
        events=[NewEvent(RunStarted(input="hi"))],
    )
    assert (again.id, again.status, again.lease_owner) == ("r1", RunStatus.RUNNING, "w#1")
    assert again == first == hand.started[0].run
    assert (len(hand.started), hand.woken) == (1, 0)
    assert [r.id for r in await runs.list_runs()] == ["r1"]
    # The taken run's log goes on after its first events, under the lease it was taken with.
    await runs.append_events("r1", [NewEvent(Note())], lease="w#1", now=T0)
    assert [(e.seq, e.kind) for e in await runs.events("r1")] == [
        (1, EventKind.RUN_STARTED),
        (2, EventKind.NOTE),
        (3, EventKind.NOTE),
    ]


async def test_concurrent_creations_with_one_idempotency_key_make_one_run(
    runs: RunStore,
) -> None:
    made = await asyncio.gather(
        *[
            runs.create_run(
                run_id=f"r{i}", skill="s", input="hi", trigger="t", now=T0, idempotency_key="k"
            )
            for i in range(5)
        ]
    )
    [run] = await runs.list_runs()
    assert {m.id for m in made} == {run.id}


async def test_a_renewed_lease_holds_past_its_first_expiry(runs: RunStore) -> None:
    await _run(runs)
    await claim_one(runs, lease="w1", now=T0, lease_seconds=30)
    renewed = await runs.renew_lease(
        "r1", lease="w1", now=T0 + timedelta(seconds=20), lease_seconds=30
    )
    assert renewed.lease_expires_at == T0 + timedelta(seconds=50)
    assert await claim_one(runs, lease="w2", now=T0 + timedelta(seconds=40)) is None
    taken = await claim_one(runs, lease="w2", now=T0 + timedelta(seconds=51))
    assert taken is not None and taken.lease_owner == "w2"
    # A run that no longer runs has no lease to renew.
    await runs.set_status("r1", RunStatus.WAITING, lease="w2", now=T0)
    with pytest.raises(LeaseLost):
        await runs.renew_lease("r1", lease="w2", now=T0, lease_seconds=30)


async def test_a_status_is_set_only_under_its_lease(runs: RunStore) -> None:
    await _run(runs)
    await claim_one(runs, lease="w1", now=T0)
    later = T0 + timedelta(seconds=5)
    with pytest.raises(LeaseLost):
        await runs.set_status("r1", RunStatus.DONE, lease="w2", now=later, result="no")
    assert (await runs.get_run("r1")).status is RunStatus.RUNNING
    usage = Usage(tokens=7, cost_usd=0.5, steps=2)
    done = await runs.set_status(
        "r1", RunStatus.KILLED, lease="w1", now=later, usage=usage, killed_by="ops", error="x"
    )
    assert (done.status, done.finished_at, done.updated_at) == (RunStatus.KILLED, later, later)
    assert (done.killed_by, done.error, done.usage, done.lease_owner) == ("ops", "x", usage, None)
    assert await runs.get_run("r1") == done


async def test_a_finished_run_is_queued_again_by_a_follow_up(runs: RunStore) -> None:
    await _run(runs)
    await claim_one(runs, lease="w1", now=T0)
    await runs.set_status("r1", RunStatus.FAILED, lease="w1", now=T0, error="model down")
    later = T0 + timedelta(minutes=1)
    follow_up = NewEvent(UserMessage(text="try again", by="ann"))
    queued = await runs.requeue("r1", now=later, events=[follow_up])
    assert (queued.status, queued.finished_at, queued.error) == (RunStatus.QUEUED, None, None)
    assert [e.kind for e in await runs.events("r1")] == [
        EventKind.RUN_STARTED,
        EventKind.USER_MESSAGE,
    ]
    # Queued already: it cannot be queued twice.
    with pytest.raises(IllegalTransition):
        await runs.requeue("r1", now=later)
    again = await claim_one(runs, lease="w2", now=later)
    assert again is not None and again.id == "r1" and again.lease_owner == "w2"


async def test_a_budget_is_extended_with_its_event_only_under_the_lease(runs: RunStore) -> None:
    await _run(runs)
    await claim_one(runs, lease="w1", now=T0)
    extended = NewEvent(BudgetExtended(extend={"usd": 1.0}, by="ann"))
    (event,) = await runs.add_budget("r1", {"usd": 1.0}, lease="w1", now=T0, event=extended)
    assert (event.seq, event.kind) == (2, EventKind.BUDGET_EXTENDED)
    await runs.add_budget("r1", {"usd": 0.5, "steps": 3}, lease="w1", now=T0, event=extended)
    assert (await runs.get_run("r1")).budget_extra == {"usd": 1.5, "steps": 3}
    with pytest.raises(LeaseLost):
        await runs.add_budget("r1", {"usd": 9}, lease="w2", now=T0, event=extended)
    assert (await runs.get_run("r1")).budget_extra == {"usd": 1.5, "steps": 3}
    assert len(await runs.events("r1")) == 3


async def test_usage_is_kept_per_run_and_summed_per_skill(runs: RunStore) -> None:
    await _run(runs, "old", now=T0 - timedelta(days=1))
    await _run(runs, "r1")
    await _run(runs, "r2", now=T0 + timedelta(hours=1))
    await _run(runs, "other", skill="t")
    for run_id, tokens in (("old", 1000), ("r1", 10), ("r2", 20), ("other", 300)):
        usage = Usage(tokens=tokens, cost_usd=tokens / 4, steps=1)
        await runs.append_events(run_id, [NewEvent(Note())], lease=None, now=T0, usage=usage)
    assert await runs.skill_usage_since("s", T0) == Usage(tokens=30, cost_usd=7.5, steps=2)
    assert await runs.skill_usage_since("nobody", T0) == Usage()
    # Newest first; by status.
    assert [r.id for r in await runs.list_runs(limit=2)] == ["r2", "r1"]
    await claim_one(runs, lease="w", now=T0)  # the oldest: "old"
    assert [r.id for r in await runs.list_runs(status=RunStatus.RUNNING)] == ["old"]
    assert sorted(await runs.runs_with_status(RunStatus.QUEUED)) == ["other", "r1", "r2"]


async def test_the_audit_trail_reads_back_newest_first(audit: AuditLog) -> None:
    for n in range(3):
        await audit.audit(
            action=f"a{n}",
            actor="ann",
            channel="web",
            now=T0 + timedelta(seconds=n),
            run_id="r1" if n else None,
            detail={"n": n, "list": [1, {"x": None}]} if n == 2 else None,
        )
    newest, middle, oldest = await audit.audit_log()
    assert [e.action for e in (newest, middle, oldest)] == ["a2", "a1", "a0"]
    assert (newest.at, newest.actor, newest.channel) == (T0 + timedelta(seconds=2), "ann", "web")
    assert newest.detail == {"n": 2, "list": [1, {"x": None}]} and oldest.detail == {}
    assert (middle.run_id, oldest.run_id, oldest.item_id) == ("r1", None, None)
    assert [e.action for e in await audit.audit_log(limit=1)] == ["a2"]
