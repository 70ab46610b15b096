"""The service loops stop when cancelled, even when a library under them lost the cancel.

Python 3.11's `asyncio.wait_for` returns the inner result when a cancel arrives just as the
inner awaitable finishes (aiosmtplib connects that way): the loop above it never sees a
CancelledError, and a server's shutdown would wait on it for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from pizzabot.agent.addresses import DeliveryRef, SlackTarget
from pizzabot.agent.channel import RecordingChannel
from pizzabot.agent.context import Context
from pizzabot.agent.model import Box, Delivery, Item, ItemKind, ItemStatus
from pizzabot.agent.outbox import Dispatcher
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.tasks import stop_if_cancelled
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


class SwallowingChannel(RecordingChannel):
    """Delivers, but loses a cancel that arrives meanwhile, as 3.11's `wait_for` can."""

    def __init__(self) -> None:
        super().__init__(name="swallowing")
        self.entered = asyncio.Event()

    async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
        self.entered.set()
        with contextlib.suppress(asyncio.CancelledError):  # lost, as by the library
            await asyncio.sleep(30)
        return await super().deliver(item, delivery)


@pytest.fixture
async def store(sqlite_url: str) -> AsyncIterator[SqlStore]:
    engine = connect(sqlite_url)
    await upgrade(engine)
    s = SqlStore(engine)
    yield s
    await s.aclose()


async def test_a_dispatcher_stops_even_when_a_channel_lost_the_cancel(store: SqlStore) -> None:
    await store.create_run(run_id="r1", skill="s", input="hi", trigger="test", now=T0)
    note = Item(
        id="u1",
        run_id="r1",
        skill="s",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="done",
        body="",
        created_at=T0,
        secret="x",
    )
    await store.create_item(note, targets=[SlackTarget("#ops")], lease=None, now=T0)
    channel = SwallowingChannel()
    dispatcher = Dispatcher(
        Context(store=store, skills=SkillBook(), clock=lambda: T0),
        {"slack": channel},
        poll_interval=0.05,
    )
    task = asyncio.create_task(dispatcher.run_forever())
    await asyncio.wait_for(channel.entered.wait(), 10)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=10)
    assert task in done and task.cancelled()
    # The delivery that was under way still finished and was recorded.
    assert [i.id for i, _ in channel.delivered] == ["u1"]
    assert (await store.deliveries("u1"))[0].status.value == "sent"


async def test_stop_if_cancelled_only_stops_a_task_with_a_cancel_pending() -> None:
    async def turn(cancel_first: bool) -> str:
        task = asyncio.current_task()
        assert task is not None
        if cancel_first:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):  # lost
                await asyncio.sleep(0)
        stop_if_cancelled()
        return "went on"

    assert await asyncio.create_task(turn(False)) == "went on"
    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(turn(True))
