"""The inbox's contract beyond the first decision: the card's version, a decision that ends its
run, copies that show a decision, and a turn's cards written together or not at all; on every
backend (see conftest.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.addresses import SlackRef, SlackTarget
from pizzabot.agent.errors import AlreadyDecided, CardChanged, NotFound
from pizzabot.agent.events import DecisionMade, NewEvent, RunFinished, RunStarted, ToolRequest
from pizzabot.agent.model import (
    Approve,
    Box,
    EventKind,
    Item,
    ItemKind,
    ItemStatus,
    Reject,
    RunStatus,
)
from pizzabot.agent.store import AuditLog, InboxItems, LeaseLost, Outbox, RunEnd, RunStore
from tests.contract.helpers import claim_one

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
APPROVED = NewEvent(DecisionMade(item_id="i1", decision=Approve()))


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
        call_id=f"c-{item_id}",
        tool="crm.send",
        args={"to": "a"},
    )


async def _waiting(runs: RunStore, items: InboxItems, *, targets: list[SlackTarget]) -> None:
    """r1 waits on its pending item i1 (delivered to `targets`), after its claim by "w"."""
    await runs.create_run(
        run_id="r1",
        skill="s",
        input="hi",
        trigger="test",
        now=T0,
        events=[NewEvent(RunStarted(input="hi"))],
    )
    await claim_one(runs, lease="w", now=T0)
    await items.create_item(
        _item(), targets=targets, lease="w", now=T0, run_status=RunStatus.WAITING
    )


async def test_a_decision_on_a_card_that_changed_is_refused_and_changes_nothing(
    runs: RunStore, items: InboxItems, audit: AuditLog
) -> None:
    await _waiting(runs, items, targets=[])
    with pytest.raises(CardChanged) as changed:
        await items.record_decision(
            "i1", Approve(), actor="u", channel="api", now=T0, final_args=None,
            event=APPROVED, version=2,
        )  # fmt: skip
    assert changed.value.item.version == 1
    assert (await items.get_item("i1")).status is ItemStatus.PENDING
    assert (await runs.get_run("r1")).status is RunStatus.WAITING
    assert len(await runs.events("r1")) == 1 and await audit.audit_log() == []
    # At the version the card showed, it is decided, with who and how.
    rejected = await items.record_decision(
        "i1", Reject("not now"), actor="u", channel="web", now=T0, final_args=None,
        event=NewEvent(DecisionMade(item_id="i1", decision=Reject("not now"))), version=1,
    )  # fmt: skip
    assert (rejected.status, rejected.decided_by, rejected.decided_via, rejected.reason) == (
        ItemStatus.REJECTED,
        "u",
        "web",
        "not now",
    )
    assert await items.get_item("i1") == rejected
    (entry,) = await audit.audit_log()
    assert entry.detail == {
        "decision": "reject",
        "status": "rejected",
        "args_before": {"to": "a"},
        "args_after": None,
        "reason": "not now",
    }
    with pytest.raises(AlreadyDecided) as already:
        await items.record_decision(
            "i1", Approve(), actor="v", channel="api", now=T0, final_args=None,
            event=APPROVED, version=1,
        )  # fmt: skip
    assert already.value.item.decided_by == "u"
    with pytest.raises(NotFound):
        await items.record_decision(
            "nope", Approve(), actor="v", channel="api", now=T0, final_args=None, event=APPROVED
        )


async def test_a_decision_that_ends_its_waiting_run_finishes_it_at_once(
    runs: RunStore, items: InboxItems
) -> None:
    await _waiting(runs, items, targets=[])
    later = T0 + timedelta(minutes=1)
    ends = RunEnd(
        result="approved", event=NewEvent(RunFinished(status=RunStatus.DONE, result="approved"))
    )
    await items.record_decision(
        "i1", Approve(), actor="u", channel="api", now=later, final_args={"to": "a"},
        event=APPROVED, ends=ends,
    )  # fmt: skip
    run = await runs.get_run("r1")
    assert (run.status, run.result, run.finished_at, run.lease_owner) == (
        RunStatus.DONE,
        "approved",
        later,
        None,
    )
    assert [e.kind for e in await runs.events("r1")][-2:] == [
        EventKind.DECISION,
        EventKind.RUN_FINISHED,
    ]
    assert await claim_one(runs, lease="w2", now=later) is None


async def test_a_decision_ends_no_run_that_is_not_waiting(
    runs: RunStore, items: InboxItems
) -> None:
    await _waiting(runs, items, targets=[])
    await runs.requeue("r1", now=T0)
    await claim_one(runs, lease="w2", now=T0)
    ends = RunEnd(result="approved", event=NewEvent(RunFinished(status=RunStatus.DONE)))
    await items.record_decision(
        "i1", Approve(), actor="u", channel="api", now=T0, final_args=None,
        event=APPROVED, ends=ends,
    )  # fmt: skip
    # Running under w2: it goes on as any run does, with the decision on its log.
    run = await runs.get_run("r1")
    assert (run.status, run.lease_owner, run.result) == (RunStatus.RUNNING, "w2", None)
    assert (await runs.events("r1"))[-1].kind is EventKind.DECISION


async def test_copies_show_a_decision_made_while_they_were_sent_and_when_asked(
    runs: RunStore, items: InboxItems, outbox: Outbox
) -> None:
    await _waiting(runs, items, targets=[SlackTarget("C1")])
    (copy,) = await outbox.run_deliveries("r1", "slack")
    assert await outbox.run_deliveries("r1", "email") == []
    # Decided while the first send was under way: once sent, the copy is due for an update.
    await items.record_decision(
        "i1", Approve(), actor="u", channel="api", now=T0, final_args=None, event=APPROVED
    )
    sent = SlackRef(channel="C1", ts="5.5", thread_ts="5.5")
    await outbox.delivery_sent(copy.id, ref=sent, now=T0)
    (due,) = await outbox.due_deliveries(now=T0)
    assert (due.id, due.status, due.needs_update, due.ref) == (copy.id, "sent", True, sent)
    await outbox.delivery_updated(copy.id, now=T0)
    assert await outbox.due_deliveries(now=T0) == []
    # A decision from a card that no longer shows the item: every copy shows it again.
    await items.show_again("i1", now=T0)
    (due,) = await outbox.due_deliveries(now=T0)
    assert due.id == copy.id and due.needs_update
    assert await outbox.find_delivery("slack", "no such ts") is None


async def test_a_turns_cards_are_written_together_or_not_at_all(
    runs: RunStore, items: InboxItems, outbox: Outbox
) -> None:
    await runs.create_run(run_id="r1", skill="s", input="hi", trigger="test", now=T0)
    await claim_one(runs, lease="w", now=T0)
    asked = [(_item(n), [NewEvent(ToolRequest(call_id=f"c-{n}", item_id=n))]) for n in ("i1", "i2")]
    # A card of a run that is not there: none of the turn's cards is written.
    stray: tuple[Item, list[NewEvent]] = (replace(_item("i3"), run_id="nope"), [])
    with pytest.raises(NotFound):
        await items.create_items([*asked, stray], targets=[SlackTarget("C1")], lease="w", now=T0)
    assert await items.list_items(run_id="r1") == [] and await runs.events("r1") == []
    assert await outbox.due_deliveries(now=T0) == []
    with pytest.raises(LeaseLost):
        await items.create_items(asked, targets=[], lease="w2", now=T0)
    assert await items.list_items() == []
    # Under its lease: both, their events, their deliveries, and the run's move.
    await items.create_items(
        asked, targets=[SlackTarget("C1")], lease="w", now=T0, run_status=RunStatus.WAITING
    )
    assert sorted(i.id for i in await items.list_items(run_id="r1")) == ["i1", "i2"]
    assert [e.kind for e in await runs.events("r1")] == [EventKind.TOOL_REQUEST] * 2
    assert len(await outbox.due_deliveries(now=T0)) == 2
    assert (await runs.get_run("r1")).status is RunStatus.WAITING
