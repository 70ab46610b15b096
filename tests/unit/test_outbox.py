"""The outbox keeps every delivery apart, on a real SQLite store with channels that fail,
stall or ask for absurd waits: the arithmetic of its retries (backoff with jitter, a bounded
`Retry-After`) is finite for every input, an attempt ends at its deadline, one channel's stall
never holds another's cards, a run's cards on one channel still go in order, and a delivery
that keeps failing becomes a dead letter with an audit entry.

The clock is injected: retries become due by moving it, not by waiting.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from pizzabot.agent.addresses import DeliveryRef, EmailTarget, SlackTarget
from pizzabot.agent.channel import Channel, DeliveryError, RecordingChannel, retry_after_seconds
from pizzabot.agent.context import Context
from pizzabot.agent.model import Box, Delivery, DeliveryStatus, Item, ItemKind, ItemStatus, Target
from pizzabot.agent.outbox import Dispatcher, Limits
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.skills import SkillBook
from pizzabot.channels.callback.channel import origin
from pizzabot.store.migrate import upgrade
from pizzabot.store.outbox import copies_need_update
from pizzabot.store.sql import SqlStore, connect

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class StallingChannel(RecordingChannel):
    """Never answers: stands in for a receiver that drips a byte now and then."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    items: list[str] = field(default_factory=list)

    async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
        self.items.append(item.id)
        self.entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@dataclass
class AskingChannel(RecordingChannel):
    """Fails every attempt, asking for the wait it was told to ask for."""

    retry_after: float | None = None
    error: str = "receiver answered 503"

    async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
        raise DeliveryError(self.error, retry_after=self.retry_after)


@pytest.fixture
async def store(sqlite_url: str) -> AsyncIterator[SqlStore]:
    engine = connect(sqlite_url)
    await upgrade(engine)
    s = SqlStore(engine)
    yield s
    await s.aclose()


async def _note(store: SqlStore, run_id: str, target: Target, *, n: int = 0) -> str:
    """An unread item of run `run_id` (made when missing), addressed to `target`."""
    if not [r for r in await store.list_runs() if r.id == run_id]:
        await store.create_run(run_id=run_id, skill="s", input="hi", trigger="test", now=T0)
    item = Item(
        id=f"{run_id}-i{n}",
        run_id=run_id,
        skill="s",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="done",
        body="",
        created_at=T0 + timedelta(seconds=n),
        secret="x",
    )
    await store.create_item(item, targets=[target], lease=None, now=T0 + timedelta(seconds=n))
    return item.id


def _dispatcher(store: SqlStore, clock: Clock, limits: Limits, **channels: Channel) -> Dispatcher:
    return Dispatcher(
        Context(store=store, skills=SkillBook(), clock=clock),
        dict(channels),
        limits=limits,
        poll_interval=0.05,
        redactor=Redactor.of("s3cret-token-0123456789"),
    )


# -- the arithmetic -----------------------------------------------------------------------


def test_the_backoff_doubles_with_jitter_between_half_and_all_of_its_step() -> None:
    limits = Limits(backoff_base=2.0, backoff_max=60.0)
    for attempts, step in [(1, 2.0), (2, 4.0), (3, 8.0), (5, 32.0), (6, 60.0), (40, 60.0)]:
        delays = [limits.delay(attempts) for _ in range(200)]
        assert all(step / 2 <= d <= step for d in delays), (attempts, min(delays), max(delays))
        assert max(delays) - min(delays) > step / 10  # jittered, not one value


@pytest.mark.parametrize(
    "asked", [99999999999999.0, math.inf, 1e308, -5.0, math.nan, None], ids=repr
)
def test_a_retry_after_is_honoured_only_up_to_its_ceiling(asked: float | None) -> None:
    limits = Limits(backoff_base=1.0, backoff_max=10.0, retry_after_max=120.0)
    delay = limits.delay(1, asked)
    assert math.isfinite(delay) and 0.5 <= delay <= 120.0
    T0 + timedelta(seconds=delay)  # the sum that overflowed before the ceiling
    if asked is not None and asked > 120:
        assert delay == 120.0


def test_a_retry_after_longer_than_the_backoff_is_waited_for() -> None:
    assert Limits(backoff_base=1.0, retry_after_max=600.0).delay(1, 45.0) == 45.0


def test_an_absurd_attempt_count_still_gives_a_finite_delay() -> None:
    assert Limits(backoff_base=1.0, backoff_max=300.0).delay(10**6) <= 300.0


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("120", 120.0),
        (" 7 ", 7.0),
        ("99999999999999", 99999999999999.0),
        ("9" * 400, math.inf),
        ("Thu, 01 Jan 2026 09:01:30 GMT", 90.0),
        ("Thu, 01 Jan 2026 08:00:00 GMT", 0.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 253402300799.0 - T0.timestamp()),
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),
        ("\u00b2", None),  # a digit to str.isdigit, not to float()
    ],
)
def test_retry_after_reads_seconds_and_http_dates(
    header: str | None, seconds: float | None
) -> None:
    assert retry_after_seconds(header, now=T0.timestamp()) == seconds


# -- the dispatcher -----------------------------------------------------------------------


async def test_an_absurd_retry_after_does_not_stop_the_other_deliveries(store: SqlStore) -> None:
    clock = Clock()
    limits = Limits(backoff_base=1.0, backoff_max=10.0, retry_after_max=60.0)
    greedy = AskingChannel(name="email", retry_after=99999999999999.0)
    slack = RecordingChannel(name="slack")
    dispatcher = _dispatcher(store, clock, limits, email=greedy, slack=slack)
    await _note(store, "r1", EmailTarget("ann@example.test"))
    await _note(store, "r2", SlackTarget("C1"), n=1)

    assert await dispatcher.drain() == 2
    assert [i.id for i, _ in slack.delivered] == ["r2-i1"]
    (asked,) = await store.deliveries("r1-i0")
    assert asked.status is DeliveryStatus.PENDING and asked.attempts == 1
    assert asked.next_attempt_at is not None
    assert asked.next_attempt_at - clock.now == timedelta(seconds=60)


async def test_an_attempt_ends_at_its_deadline(store: SqlStore) -> None:
    stall = StallingChannel(name="slack")
    dispatcher = _dispatcher(store, Clock(), Limits(attempt_timeout=0.05), slack=stall)
    await _note(store, "r1", SlackTarget("C1"))
    await asyncio.wait_for(dispatcher.drain(), 10)  # would hang without the deadline
    (d,) = await store.deliveries("r1-i0")
    assert d.status is DeliveryStatus.PENDING and d.attempts == 1
    assert d.last_error == "no answer within 0.05s"


async def test_a_stalled_channel_never_holds_another_channels_cards(store: SqlStore) -> None:
    stall = StallingChannel(name="email")
    slack = RecordingChannel(name="slack")
    # A deadline far longer than the test: only the lanes can let Slack's card through.
    limits = Limits(attempt_timeout=3600, concurrency=1)
    dispatcher = _dispatcher(store, Clock(), limits, email=stall, slack=slack)
    await _note(store, "r1", EmailTarget("ann@example.test"))
    await _note(store, "r2", SlackTarget("C1"), n=1)
    outbox = asyncio.create_task(dispatcher.run_forever())
    try:
        await asyncio.wait_for(stall.entered.wait(), 10)
        dispatcher.wake()
        while not slack.delivered:
            await asyncio.sleep(0.01)
        # Another run's mail waits while the stalled one fills its lane (concurrency 1);
        # Slack's lane is untouched by that.
        await _note(store, "r3", EmailTarget("bob@example.test"), n=2)
        await _note(store, "r4", SlackTarget("C2"), n=3)
        dispatcher.wake()
        while len(slack.delivered) < 2:
            await asyncio.sleep(0.01)
    finally:
        outbox.cancel()
        await asyncio.gather(outbox, return_exceptions=True)
    assert [i.id for i, _ in slack.delivered] == ["r2-i1", "r4-i3"]
    assert stall.items == ["r1-i0"]
    # The stalled attempt was cut short by the stop, not failed: it is tried after a restart.
    (d,) = await store.deliveries("r1-i0")
    assert d.status is DeliveryStatus.PENDING and d.attempts == 0


async def test_runs_go_side_by_side_and_a_runs_cards_in_order(store: SqlStore) -> None:
    @dataclass
    class Gate(RecordingChannel):
        """Holds each delivery until released, noting who is under way at once."""

        gate: asyncio.Event = field(default_factory=asyncio.Event)
        under_way: set[str] = field(default_factory=set)
        most: set[str] = field(default_factory=set)

        async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
            self.under_way.add(item.id)
            self.most = max(self.most, set(self.under_way), key=len)
            await self.gate.wait()
            self.under_way.discard(item.id)
            return await super().deliver(item, delivery)

    slack = Gate(name="slack")
    dispatcher = _dispatcher(store, Clock(), Limits(concurrency=4), slack=slack)
    for n, run_id in enumerate(["a", "b", "a", "c"]):
        await _note(store, run_id, SlackTarget("C1"), n=n)
    drained = asyncio.create_task(dispatcher.drain())
    while len(slack.under_way) < 3:
        await asyncio.sleep(0.01)
    slack.gate.set()
    assert await asyncio.wait_for(drained, 10) == 4
    # Three runs at once; run a's second card waited for its first.
    assert slack.most == {"a-i0", "b-i1", "c-i3"}
    order = [i.id for i, _ in slack.delivered]
    assert order.index("a-i0") < order.index("a-i2")


async def test_a_delivery_that_keeps_failing_becomes_a_dead_letter(store: SqlStore) -> None:
    clock = Clock()
    limits = Limits(max_attempts=3, backoff_base=1.0, backoff_max=4.0, retry_after_max=30.0)
    failing = AskingChannel(
        name="email", retry_after=99999999999999.0, error="refused: s3cret-token-0123456789"
    )
    dispatcher = _dispatcher(store, clock, limits, email=failing)
    await _note(store, "r1", EmailTarget("ann@example.test"))
    waits = []
    for _ in range(3):
        assert await dispatcher.drain() == 1
        (d,) = await store.deliveries("r1-i0")
        if d.next_attempt_at is not None:
            waits.append((d.next_attempt_at - clock.now).total_seconds())
            clock.now = d.next_attempt_at
    assert waits == [30.0, 30.0]  # the ceiling, not the 3 million years asked for
    (d,) = await store.deliveries("r1-i0")
    assert (d.status, d.attempts, d.next_attempt_at) == (DeliveryStatus.FAILED, 3, None)
    clock.advance(10**6)
    assert await dispatcher.drain() == 0  # never tried again
    assert await store.dead_letters() == {"email": 1}
    (entry,) = [a for a in await store.audit_log() if a.action == "delivery_dead"]
    assert (entry.channel, entry.item_id, entry.run_id) == ("email", "r1-i0", "r1")
    assert entry.detail["attempts"] == 3 and entry.detail["delivery_id"] == d.id
    assert "s3cret" not in entry.detail["error"] and "refused" in entry.detail["error"]


async def test_a_failed_update_gives_up_too_and_a_success_resets_the_count(
    store: SqlStore,
) -> None:
    @dataclass
    class Flaky(RecordingChannel):
        fail_updates: int = 0

        async def update(self, item: Item, delivery: Delivery) -> None:
            if self.fail_updates > 0:
                self.fail_updates -= 1
                raise DeliveryError("update refused")
            await super().update(item, delivery)

    clock = Clock()
    slack = Flaky(name="slack", fail_times=1)
    dispatcher = _dispatcher(store, clock, Limits(max_attempts=2, backoff_max=1.0), slack=slack)
    item_id = await _note(store, "r1", SlackTarget("C1"))
    await dispatcher.drain()  # the send fails once ...
    clock.advance(5)
    await dispatcher.drain()  # ... then goes out, and the count starts again
    (d,) = await store.deliveries(item_id)
    assert (d.status, d.attempts) == (DeliveryStatus.SENT, 0)
    slack.fail_updates = 5
    await store.db.run(lambda c: copies_need_update(c, item_id, clock()))
    for _ in range(2):
        clock.advance(5)
        assert await dispatcher.drain() == 1
    (d,) = await store.deliveries(item_id)
    assert (d.status, d.attempts, d.needs_update) == (DeliveryStatus.FAILED, 2, False)
    assert d.ref is not None  # replies and buttons on the copy still find it
    assert await store.dead_letters() == {"slack": 1}


async def test_a_delivery_for_a_channel_this_server_lacks_is_given_up(store: SqlStore) -> None:
    dispatcher = _dispatcher(store, Clock(), Limits(), slack=RecordingChannel(name="slack"))
    await _note(store, "r1", EmailTarget("ann@example.test"))
    assert await dispatcher.drain() == 1
    (d,) = await store.deliveries("r1-i0")
    assert d.status is DeliveryStatus.FAILED
    assert d.last_error == "channel 'email' is not configured"
    assert [a.action for a in await store.audit_log()] == ["delivery_dead"]


async def test_a_stalled_receiver_holds_only_its_own_sub_lane(store: SqlStore) -> None:
    """A channel that names its receivers (`target`, a callback URL's origin) gets a sub-lane
    per receiver: more due deliveries to a stalled one than a look reads still leave another
    receiver's delivery reached and sent."""

    @dataclass
    class ByReceiver(StallingChannel):
        async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
            if delivery.address == "SLOW":
                return await super().deliver(item, delivery)
            self.delivered.append((item, delivery))
            return None

        def target(self, delivery: Delivery) -> str:
            return delivery.address

    hooks = ByReceiver(name="slack")
    limits = Limits(attempt_timeout=3600, concurrency=1, targets=4)
    dispatcher = _dispatcher(store, Clock(), limits, slack=hooks)
    for n in range(60):  # more than one look reads, all older than the other receiver's
        await _note(store, f"slow{n}", SlackTarget("SLOW"), n=n)
    await _note(store, "fast", SlackTarget("FAST"), n=60)
    outbox = asyncio.create_task(dispatcher.run_forever())
    try:
        while not hooks.delivered:
            await asyncio.sleep(0.01)
    finally:
        outbox.cancel()
        await asyncio.gather(outbox, return_exceptions=True)
    assert [i.id for i, _ in hooks.delivered] == ["fast-i60"]
    assert hooks.items == ["slow0-i0"]  # one under way for the stalled receiver, no more


@pytest.mark.parametrize(
    ("url", "receiver"),
    [
        ("https://hooks.example/a?x=1", "https://hooks.example:443"),
        ("HTTPS://Hooks.Example:443/b", "https://hooks.example:443"),
        ("http://hooks.example./c", "http://hooks.example:80"),
        ("http://hooks.example:8080/", "http://hooks.example:8080"),
        ("http://[::1]:9/x", "http://::1:9"),
        ("not a url", "not a url"),
    ],
)
def test_a_callback_receiver_is_its_urls_origin_however_spelled(url: str, receiver: str) -> None:
    assert origin(url) == receiver
