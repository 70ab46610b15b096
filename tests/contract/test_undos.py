"""An FYI's Undo in the store: offered with the item, taken at most once (the second is told
who took it), then ended with its outcome, which shows again on every sent copy; on every
backend (see conftest.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.addresses import SlackRef, SlackTarget
from pizzabot.agent.errors import AlreadyUndone, Conflict, NotFound
from pizzabot.agent.events import NewEvent, RunStarted
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Undo
from pizzabot.agent.store import InboxItems, Outbox, RunStore, Undos

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def _fyi(item_id: str, undo: Undo | None) -> Item:
    return Item(
        id=item_id,
        run_id="r1",
        skill="s",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="FYI: s ran crm.add_contact",
        body="crm.add_contact ran without asking",
        created_at=T0,
        tool="crm.add_contact" if undo is not None else None,
        args={"email": "a@example.com"} if undo is not None else None,
        undo=undo,
    )


async def _fyis(runs: RunStore, items: InboxItems) -> None:
    await runs.create_run(
        run_id="r1",
        skill="s",
        input="hi",
        trigger="test",
        now=T0,
        events=[NewEvent(RunStarted(input="hi"))],
    )
    offered = Undo(tool="crm.delete_contact", args={"id": 7, "email": "a@example.com"})
    await items.create_item(_fyi("i1", offered), targets=[SlackTarget("C1")], lease=None, now=T0)
    await items.create_item(_fyi("i2", None), targets=[], lease=None, now=T0)


async def test_an_undo_is_taken_once_and_ends_with_its_outcome(
    runs: RunStore, items: InboxItems, undos: Undos, outbox: Outbox
) -> None:
    await _fyis(runs, items)
    stored = await items.get_item("i1")
    assert stored.undo == Undo(tool="crm.delete_contact", args={"id": 7, "email": "a@example.com"})
    (copy,) = await outbox.run_deliveries("r1", "slack")
    await outbox.delivery_sent(
        copy.id, ref=SlackRef(channel="C1", ts="1.1", thread_ts="1.1"), now=T0
    )

    taken = await undos.start_undo("i1", by="U1", via="slack", now=T1)
    assert taken.undo is not None
    assert (taken.undo.state, taken.undo.by, taken.undo.via, taken.undo.at) == (
        "running",
        "U1",
        "slack",
        T1,
    )
    # The sent copy is updated once the Undo has ended, not while it runs.
    assert await outbox.due_deliveries(now=T1) == []

    with pytest.raises(AlreadyUndone, match="already undone by U1 via slack") as caught:
        await undos.start_undo("i1", by="alice@example.com", via="web", now=T1)
    assert caught.value.item.undo is not None and caught.value.item.undo.by == "U1"

    ended = await undos.finish_undo("i1", ok=False, outcome="no such contact", now=T1)
    assert ended.undo is not None
    assert (ended.undo.state, ended.undo.outcome, ended.undo.by) == (
        "failed",
        "no such contact",
        "U1",
    )
    assert (await items.get_item("i1")).undo == ended.undo
    (due,) = await outbox.due_deliveries(now=T1)
    assert due.id == copy.id and due.needs_update
    with pytest.raises(AlreadyUndone):
        await undos.start_undo("i1", by="U1", via="slack", now=T1)


async def test_an_item_without_an_undo_offers_none(
    runs: RunStore, items: InboxItems, undos: Undos
) -> None:
    await _fyis(runs, items)
    assert (await items.get_item("i2")).undo is None
    with pytest.raises(Conflict, match="offers no Undo"):
        await undos.start_undo("i2", by="U1", via="slack", now=T1)
    with pytest.raises(NotFound):
        await undos.start_undo("nope", by="U1", via="slack", now=T1)
