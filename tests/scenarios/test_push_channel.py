"""The push channel through the outbox, with push services played by an httpx mock: an item
reaches the devices of those who may see it (one delivery each), and each device's push
service is handled on its own: a rate limit is retried when it asks, a `410 Gone` removes
that subscription, and neither holds up the other device."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from pizzabot.agent.addresses import PushTarget
from pizzabot.agent.context import Context
from pizzabot.agent.devices import OWNER, Subscription
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Box, DeliveryStatus, Item, ItemKind, ItemStatus
from pizzabot.agent.outbox import Dispatcher
from pizzabot.agent.policy import Access, Scope
from pizzabot.agent.policy.tokens import Token
from pizzabot.agent.skills import SkillBook, parse_skill
from pizzabot.agent.timers import Timers
from pizzabot.channels.push import PushChannel, VapidKey
from pizzabot.store.migrate import upgrade
from pizzabot.store.phone import SqlSubscriptions
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.tokens import SqlTokens
from pizzabot.store.triggers import TriggerStore
from tests.peers.push_service import PushService

T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)

SKILL = """
name: ops
people: {alice: {email: alice@example.com}}
approvers: [alice]
tools:
  ops.restart: {policy: ask, remind_after: 1h}
"""


@dataclass
class Outbox:
    store: SqlStore
    subs: SqlSubscriptions
    tokens: SqlTokens
    dispatcher: Dispatcher
    answers: dict[str, httpx.Response]
    seen: list[str]
    timers: Timers
    now: list[datetime]

    async def device(self, name: str, holder: str, push: PushService) -> Subscription:
        sub = push.subscribe("unused")
        endpoint = f"https://{name}.push.test/p/1"
        made = Subscription(
            id=f"sub-{name}",
            endpoint=endpoint,
            p256dh=sub["keys"]["p256dh"],
            auth=sub["keys"]["auth"],
            principal=holder,
            label=name,
            created_at=T0,
        )
        return await self.subs.add(made, actor="owner", channel="web")

    async def token(self, token_id: str, person: str) -> str:
        token = Token(token_id, person, Scope.DECIDE, person, T0, "owner")
        await self.tokens.add(token, secret_hash=token_id * 8, channel="api")
        return f"token:{token_id}"


@pytest.fixture
async def outbox(sqlite_url: str, tmp_path: Path) -> AsyncIterator[Outbox]:
    engine = connect(sqlite_url)
    await upgrade(engine)
    store = SqlStore(engine)
    skills = SkillBook({"ops": parse_skill(SKILL, "ops.yaml")})
    answers: dict[str, httpx.Response] = {}
    seen: list[str] = []
    now = [T0]

    def service(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.host)
        assert request.headers["authorization"].startswith("vapid t=")
        assert request.headers["content-encoding"] == "aes128gcm"
        return answers.get(request.url.host, httpx.Response(201))

    subs, tokens = SqlSubscriptions(store.db), SqlTokens(store.db)
    channel = PushChannel(
        subscriptions=subs,
        access=Access(skills=skills),
        tokens=tokens,
        key=VapidKey.load_or_create(tmp_path / "vapid.pem", contact="mailto:ops@example.com"),
        client=httpx.AsyncClient(transport=httpx.MockTransport(service)),
        clock=lambda: now[0],
    )
    ctx = Context(store=store, skills=skills, clock=lambda: now[0], channels=frozenset({"push"}))
    timers = Timers(ctx, Inbox(ctx), TriggerStore(store))
    dispatcher = Dispatcher(ctx, {"push": channel})
    try:
        yield Outbox(store, subs, tokens, dispatcher, answers, seen, timers, now)
    finally:
        await channel.aclose()
        await store.aclose()


async def card(store: SqlStore) -> Item:
    await store.create_run(run_id="r1", skill="ops", input="restart it", trigger="api", now=T0)
    item = Item(
        id="i1",
        run_id="r1",
        skill="ops",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="ops wants to run ops.restart",
        body="",
        created_at=T0,
        call_id="c1",
        tool="ops.restart",
        args={"host": "db-1"},
    )
    return await store.create_item(item, targets=[PushTarget()], lease=None, now=T0)


async def test_a_card_reaches_only_its_peoples_devices_each_on_its_own(
    outbox: Outbox, tmp_path: Path
) -> None:
    # The server's VAPID key was made for this test, readable by its owner alone.
    assert (tmp_path / "vapid.pem").stat().st_mode & 0o777 == 0o600
    async with PushService() as push:
        alice = await outbox.token("t-alice", "alice")
        bob = await outbox.token("t-bob", "bob")  # names a person who approves nothing here
        for name, holder in (("mine", OWNER), ("alices", alice), ("bobs", bob)):
            await outbox.device(name, holder, push)
        await outbox.device("gone", OWNER, push)
        outbox.answers["alices.push.test"] = httpx.Response(429, headers={"Retry-After": "120"})
        outbox.answers["gone.push.test"] = httpx.Response(410)
        item = await card(outbox.store)

        await outbox.dispatcher.drain()  # the item's one push target becomes one per device
        await outbox.dispatcher.drain()
    by_address = {d.address: d for d in await outbox.store.deliveries(item.id)}
    assert set(by_address) == {"subscribers", "sub-mine", "sub-alices", "sub-gone"}
    assert sorted(outbox.seen) == ["alices.push.test", "gone.push.test", "mine.push.test"]
    assert by_address["sub-mine"].status is DeliveryStatus.SENT
    slow = by_address["sub-alices"]  # asked to wait: retried then, not given up
    assert slow.status is DeliveryStatus.PENDING and slow.next_attempt_at is not None
    assert (slow.next_attempt_at - T0).total_seconds() >= 120
    dead = by_address["sub-gone"]  # the browser unsubscribed: given up, and forgotten
    assert dead.status is DeliveryStatus.FAILED and "410" in (dead.last_error or "")
    assert await outbox.subs.get("sub-gone") is None
    actions = [e.action for e in await outbox.store.audit_log()]
    assert "push_unsubscribed" in actions and "delivery_dead" in actions


async def test_a_reminder_pushes_the_card_again(outbox: Outbox) -> None:
    async with PushService() as push:
        await outbox.device("mine", OWNER, push)
        item = await card(outbox.store)
        await outbox.dispatcher.drain()
        await outbox.dispatcher.drain()
        assert outbox.seen == ["mine.push.test"]
        outbox.now[0] = T0 + timedelta(hours=1, minutes=1)
        assert [a.kind for a in await outbox.timers.tick()] == ["reminded"]
        await outbox.dispatcher.drain()
        await outbox.dispatcher.drain()
    assert outbox.seen == ["mine.push.test", "mine.push.test"]
    sent = [d for d in await outbox.store.deliveries(item.id) if d.address == "sub-mine"]
    assert [d.status for d in sent] == [DeliveryStatus.SENT, DeliveryStatus.SENT]
