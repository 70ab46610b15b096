"""Listing items a page at a time (`list_items(before=…)`), as the approval clock reads the
pending ones: newest first, the next page after the last item seen, items of one moment told
apart by their ids. Every store backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pizzabot.agent.events import NewEvent, RunStarted
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.agent.store import InboxItems, RunStore
from tests.contract.helpers import claim_one

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


async def _waiting(runs: RunStore, items: InboxItems, n: int, at: datetime) -> None:
    await runs.create_run(
        run_id=f"r{n}",
        skill="s",
        input="hi",
        trigger="test",
        now=at,
        events=[NewEvent(RunStarted(input="hi"))],
    )
    await claim_one(runs, lease=f"w{n}", now=at, lease_seconds=30)
    item = Item(
        id=f"i{n}",
        run_id=f"r{n}",
        skill="s",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="t",
        body="b",
        created_at=at,
        call_id="c1",
        tool="crm.send",
        args={"to": "a"},
        secret="sekret",
    )
    await items.create_item(item, targets=[], lease=f"w{n}", now=at, run_status=RunStatus.WAITING)


async def test_pages_of_pending_items_follow_each_other(runs: RunStore, items: InboxItems) -> None:
    for n, at in ((1, T0), (2, T0), (3, T0 + timedelta(seconds=1))):
        await _waiting(runs, items, n, at)
    a, p = Box.ACTION, ItemStatus.PENDING

    first = await items.list_items(box=a, status=p, limit=2)
    assert [i.id for i in first] == ["i3", "i2"]
    after = (first[-1].created_at, first[-1].id)
    assert [i.id for i in await items.list_items(box=a, status=p, limit=2, before=after)] == ["i1"]
    assert await items.list_items(box=a, status=p, limit=2, before=(T0, "i1")) == []
