"""`SlackChannel` against the local Web API recorder: threads per run, DMs, updates, and how
Slack's failures become retries for the outbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.addresses import SlackRef
from pizzabot.agent.channel import DeliveryError
from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import Event
from pizzabot.agent.model import (
    Box,
    Delivery,
    DeliveryStatus,
    Item,
    ItemKind,
    ItemStatus,
    Run,
    RunStatus,
)
from pizzabot.channels.slack import SlackChannel
from tests.peers.slack_api import SlackApi

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BASE = "http://pizza.example"


@dataclass
class Deliveries:
    """What the channel reads from the store: a run's deliveries, and runs."""

    rows: list[Delivery] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]:
        return [d for d in self.rows if d.run_id == run_id and d.channel == channel]

    async def deliveries(self, item_id: str) -> list[Delivery]:
        return [d for d in self.rows if d.item_id == item_id]

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None:
        return None

    async def get_run(self, run_id: str) -> Run:
        if run_id not in self.runs:
            raise NotFound(f"no run {run_id}")
        return self.runs[run_id]

    # No model turn here has more than one call: no card offers "Approve all".
    async def get_item(self, item_id: str) -> Item:
        raise NotFound(f"no item {item_id}")

    async def list_items(self, **_: Any) -> list[Item]:
        return []

    async def events(self, run_id: str) -> list[Event]:
        return []


def item(item_id: str = "it1", run_id: str = "run1", **over: Any) -> Item:
    base = Item(
        id=item_id,
        run_id=run_id,
        skill="sales",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="sales wants to run crm.send_email",
        body="Mailing Ann.",
        created_at=AT,
        tool="crm.send_email",
        args={"to": "ann@example.com"},
        schema={"type": "object", "properties": {"to": {"type": "string"}}},
    )
    return replace(base, **over)


def delivery(
    delivery_id: str,
    *,
    item_id: str = "it1",
    run_id: str = "run1",
    address: str = "C123",
    minutes: int = 0,
    status: DeliveryStatus = DeliveryStatus.PENDING,
    ref: SlackRef | None = None,
) -> Delivery:
    return Delivery(
        id=delivery_id,
        item_id=item_id,
        run_id=run_id,
        channel="slack",
        address=address,
        status=status,
        attempts=0,
        ref=ref,
        last_error=None,
        needs_update=False,
        next_attempt_at=None,
        created_at=AT + timedelta(minutes=minutes),
    )


@pytest.fixture
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api
        api.check()  # whatever else a test checks, Slack accepts what the channel sent


def channel_for(slack: SlackApi, store: Deliveries) -> SlackChannel:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.url)
    return SlackChannel(client=client, store=store, base_url=BASE)


async def test_a_runs_items_share_one_thread_under_its_first_message(slack: SlackApi) -> None:
    store = Deliveries()
    ch = channel_for(slack, store)
    first = delivery("d1")
    store.rows.append(first)
    ref = await ch.deliver(item(), first)
    assert ref is not None
    ts = ref.ts
    assert ref == SlackRef(channel="C123", ts=ts, thread_ts=ts)
    [post] = slack.calls_to("chat.postMessage")
    assert post.token == "xoxb-test" and "thread_ts" not in post.args
    assert post.args["unfurl_links"] is False

    store.rows[0] = replace(first, status=DeliveryStatus.SENT, ref=ref)
    second = delivery("d2", item_id="it2", minutes=1)
    store.rows.append(second)
    ref2 = await ch.deliver(item("it2"), second)
    assert ref2 is not None and ref2.thread_ts == ts and ref2.ts != ts
    assert slack.calls_to("chat.postMessage")[-1].args["thread_ts"] == ts

    # Another run starts its own thread.
    other = delivery("d3", item_id="it3", run_id="run2", minutes=2)
    store.rows.append(other)
    ref3 = await ch.deliver(item("it3", run_id="run2"), other)
    assert ref3 is not None and ref3.thread_ts == ref3.ts


async def test_a_later_item_waits_while_the_runs_first_message_is_unsent(slack: SlackApi) -> None:
    first, second = delivery("d1"), delivery("d2", item_id="it2", minutes=1)
    store = Deliveries([first, second])
    ch = channel_for(slack, store)
    with pytest.raises(DeliveryError) as caught:
        await ch.deliver(item("it2"), second)
    assert caught.value.retry_after is not None and not caught.value.permanent
    assert slack.calls_to("chat.postMessage") == []
    # Once the first one gave up for good, the next one starts the thread.
    store.rows[0] = replace(first, status=DeliveryStatus.FAILED)
    ref = await ch.deliver(item("it2"), second)
    assert ref is not None and ref.thread_ts == ref.ts


async def test_a_user_address_is_a_direct_message(slack: SlackApi) -> None:
    store = Deliveries()
    ch = channel_for(slack, store)
    for n in range(2):
        d = delivery(f"d{n}", item_id=f"it{n}", run_id=f"run{n}", address="U42")
        store.rows.append(d)
        ref = await ch.deliver(item(f"it{n}", run_id=f"run{n}"), d)
        assert ref is not None and ref.channel == "D42"
    assert [c.args["users"] for c in slack.calls_to("conversations.open")] == ["U42"]
    assert {c.args["channel"] for c in slack.calls_to("chat.postMessage")} == {"D42"}


async def test_update_rerenders_the_sent_copy(slack: SlackApi) -> None:
    store = Deliveries()
    ch = channel_for(slack, store)
    decided = item(status=ItemStatus.APPROVED, decided_by="U1", decided_via="slack", decided_at=AT)
    ref = SlackRef(channel="C123", ts="171.5", thread_ts="171.5")
    await ch.update(decided, delivery("d1", status=DeliveryStatus.SENT, ref=ref))
    [update] = slack.calls_to("chat.update")
    assert update.args["channel"] == "C123" and update.args["ts"] == "171.5"
    assert [b for b in update.args["blocks"] if b["type"] == "actions"] == []
    await ch.update(decided, delivery("d2", status=DeliveryStatus.SENT, ref=None))
    assert len(slack.calls_to("chat.update")) == 1  # nothing was posted, nothing to update


async def test_a_rate_limit_becomes_a_retry_after_slacks_delay(slack: SlackApi) -> None:
    ch = channel_for(slack, Deliveries())
    slack.fail_next(1, status=429, retry_after=7)
    with pytest.raises(DeliveryError) as caught:
        await ch.deliver(item(), delivery("d1"))
    assert caught.value.retry_after == 7.0 and not caught.value.permanent
    slack.fail_next(1, status=429, retry_after=3, methods={"chat.update"})
    ref = SlackRef(channel="C123", ts="171.5", thread_ts="171.5")
    with pytest.raises(DeliveryError) as caught:
        await ch.update(item(), delivery("d1", status=DeliveryStatus.SENT, ref=ref))
    assert caught.value.retry_after == 3.0


async def test_slack_errors_are_retried_unless_retrying_cannot_help(slack: SlackApi) -> None:
    ch = channel_for(slack, Deliveries())
    slack.fail_next(1, status=500)
    with pytest.raises(DeliveryError) as caught:
        await ch.deliver(item(), delivery("d1"))
    assert not caught.value.permanent and caught.value.retry_after is None
    slack.fail_next(1, status=200, error="invalid_blocks")
    with pytest.raises(DeliveryError) as caught:
        await ch.deliver(item(), delivery("d1"))
    assert caught.value.permanent
    assert await ch.deliver(item(), delivery("d1")) is not None


async def test_a_runs_note_is_marked_by_how_the_run_ended(slack: SlackApi) -> None:
    store = Deliveries()
    ch = channel_for(slack, store)
    for run_id, status in (("ok", RunStatus.DONE), ("bad", RunStatus.FAILED)):
        store.runs[run_id] = Run(
            id=run_id,
            skill="sales",
            status=status,
            input="go",
            trigger="api",
            created_at=AT,
            updated_at=AT,
            finished_at=AT,
        )
        note = item(
            f"note-{run_id}",
            run_id=run_id,
            box=Box.UNREAD,
            kind=ItemKind.RUN,
            status=ItemStatus.UNREAD,
            title="sales finished",  # what the title says does not count
            tool=None,
            args=None,
            schema=None,
        )
        await ch.deliver(note, delivery(f"d-{run_id}", item_id=note.id, run_id=run_id))
    ok, bad = (c.args["blocks"][0]["text"]["text"] for c in slack.calls_to("chat.postMessage"))
    assert ok == "✅ sales finished" and bad == "⚠️ sales finished"


async def test_slack_unreachable_is_a_retry(slack: SlackApi) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.url, timeout=5)
    ch = SlackChannel(client=client, store=Deliveries(), base_url=BASE)
    await slack.close()  # Slack is gone
    with pytest.raises(DeliveryError) as caught:
        await ch.deliver(item(), delivery("d1"))
    assert not caught.value.permanent
