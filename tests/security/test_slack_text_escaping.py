"""What a model or a tool wrote never becomes Slack markup: no `<!channel>` that pings a whole
channel, no `<@U…>` mention, no `<https://evil|click here>` link dressed as something else, in
the top-level `text` (the notification and fallback Slack also reads as mrkdwn) as in the
blocks, of every message the channel posts and updates, and in the Home tab."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.errors import NotFound
from pizzabot.agent.events import Event
from pizzabot.agent.model import Box, Delivery, DeliveryStatus, Item, ItemKind, ItemStatus, Run
from pizzabot.channels.slack import SlackChannel
from pizzabot.channels.slack.home import HomeInbox, home_view
from tests.peers.slack_api import Call, SlackApi

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BASE = "http://pizza.example"
HOSTILE = "Done. <!channel> <!here|here> ping <@U0ADMIN> and <https://evil.example/|click here>"
RAW = ("<!channel>", "<!here", "<@U0ADMIN>", "<https://evil.example")


@dataclass
class NoDeliveries:
    rows: list[Delivery] = field(default_factory=list)

    async def run_deliveries(self, run_id: str, channel: str) -> list[Delivery]:
        return []

    async def deliveries(self, item_id: str) -> list[Delivery]:
        return []

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None:
        return None

    async def get_run(self, run_id: str) -> Run:
        raise NotFound(run_id)

    async def get_item(self, item_id: str) -> Item:
        raise NotFound(item_id)

    async def list_items(self, **_: Any) -> list[Item]:
        return []

    async def events(self, run_id: str) -> list[Event]:
        return []


@pytest.fixture
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


def delivery(item: Item) -> Delivery:
    return Delivery(
        id="d-" + item.id,
        item_id=item.id,
        run_id=item.run_id,
        channel="slack",
        address="C123",
        status=DeliveryStatus.PENDING,
        attempts=0,
        ref=None,
        last_error=None,
        needs_update=False,
        next_attempt_at=None,
        created_at=AT,
    )


def result(body: str) -> Item:
    return Item(
        id="u1",
        run_id="run1",
        skill="sales",
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title="sales finished",
        body=body,
        created_at=AT,
    )


def action(title: str) -> Item:
    return Item(
        id="a1",
        run_id="run2",
        skill="sales",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title=title,
        body=HOSTILE,
        created_at=AT,
        call_id="c1",
        tool="crm.send_email",
        args={"to": HOSTILE},
        schema={"type": "object", "properties": {"to": {"type": "string"}}},
    )


def assert_inert(call: Call) -> None:
    text = str(call.args["text"])
    assert not [raw for raw in RAW if raw in text], text
    assert "&lt;!channel&gt;" in text or "&lt;!here" in text
    blocks = json.dumps(call.args["blocks"], ensure_ascii=False)
    assert not [raw for raw in RAW if raw in blocks], blocks


async def test_a_results_top_level_text_is_escaped_like_its_blocks(slack: SlackApi) -> None:
    channel = SlackChannel(
        client=AsyncWebClient(token="xoxb-test", base_url=slack.url),
        store=NoDeliveries(),
        base_url=BASE,
    )
    item = result(HOSTILE)
    await channel.deliver(item, delivery(item))
    [post] = slack.calls_to("chat.postMessage")
    assert_inert(post)
    assert str(post.args["text"]).startswith("sales finished: Done. &lt;!channel&gt;")


async def test_an_actions_text_is_escaped_when_posted_and_when_updated(slack: SlackApi) -> None:
    channel = SlackChannel(
        client=AsyncWebClient(token="xoxb-test", base_url=slack.url),
        store=NoDeliveries(),
        base_url=BASE,
    )
    item = action("sales wants to run crm.<!channel>")
    ref = await channel.deliver(item, delivery(item))
    [post] = slack.calls_to("chat.postMessage")
    assert_inert(post)
    sent = delivery(item)
    decided = Item(**{**item.__dict__, "status": ItemStatus.REJECTED, "reason": HOSTILE})
    await channel.update(
        decided, Delivery(**{**sent.__dict__, "status": DeliveryStatus.SENT, "ref": ref})
    )
    [update] = slack.calls_to("chat.update")
    assert_inert(update)


def test_the_home_tab_shows_the_same_text_inert() -> None:
    view = home_view(
        HomeInbox(actions=[action(HOSTILE)], unread=[result(HOSTILE)], may_start=True),
        base_url=BASE,
    )
    shown: Any = json.dumps(view, ensure_ascii=False)
    assert not [raw for raw in RAW if raw in shown]
    assert "&lt;@U0ADMIN&gt;" in shown
