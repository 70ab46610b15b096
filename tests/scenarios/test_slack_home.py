"""The Home tab as each person's inbox: the real Bolt app over HTTP (signed `app_home_opened`
events through Bolt's FastAPI handler), a real SQLite store full of items, and Slack's Web API
played by the local recorder, whose every payload is checked against Slack's limits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Approve, Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy import Access, Principal
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import Skill, SkillBook
from pizzabot.bot.core import build
from pizzabot.channels.slack import HomeTabs, SlackInbound, build_app
from pizzabot.channels.slack import home as home_tab
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.peers.item_reads import count_item_reads
from tests.peers.slack_api import Call, SlackApi, app_home_opened, signed_headers
from tests.waiting import eventually

SECRET = "home-tab-signing-secret"
APPROVER = "U1"
AT = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
BASE = "http://pizza.example"


def skill(name: str, approvers: list[str]) -> Skill:
    return Skill.model_validate(
        {
            "name": name,
            "description": f"the {name} skill",
            "instructions": "Help.",
            "model": "openai/none",
            "approvers": {"slack": approvers},
        }
    )


@dataclass
class Home:
    slack: SlackApi
    store: SqlStore
    inbox: Inbox
    tabs: HomeTabs
    http: httpx.AsyncClient
    runs: Runs

    async def open(self, user: str) -> httpx.Response:
        body = json.dumps(app_home_opened(user))
        headers = signed_headers(SECRET, body, content_type="application/json")
        return await self.http.post("/slack/events", content=body.encode(), headers=headers)

    async def post_payload(self, payload: dict[str, Any]) -> httpx.Response:
        """An interaction (a click, a modal submission), signed as Slack signs it."""
        body = urlencode({"payload": json.dumps(payload)})
        return await self.http.post(
            "/slack/events", content=body, headers=signed_headers(SECRET, body)
        )

    async def item_when(self, item_id: str, status: ItemStatus, timeout: float = 20) -> Item:
        """The item once it has `status` (listeners finish after Slack's ack)."""
        seen: list[ItemStatus] = []

        async def there() -> Item | None:
            item = await self.store.get_item(item_id)
            seen.append(item.status)
            return item if item.status is status else None

        return await eventually(
            there,
            what=f"item {item_id} to be {status.value}",
            timeout=timeout,
            interval=0.02,
            context=lambda: f"its status: {seen[-1].value if seen else 'never read'}",
        )

    async def add_items(self, skill: str, n: int, *, box: Box = Box.ACTION) -> list[Item]:
        made = []
        for i in range(n):
            run = await self.store.create_run(
                run_id=f"{skill}-{box.value}-run{i}",
                skill=skill,
                input="go",
                trigger="test",
                now=AT,
            )
            action = box is Box.ACTION
            item = Item(
                id=f"{skill}-{box.value}-{i:03d}",
                run_id=run.id,
                skill=skill,
                box=box,
                kind=ItemKind.TOOL if action else ItemKind.RUN,
                status=ItemStatus.PENDING if action else ItemStatus.UNREAD,
                title=f"{skill} wants to run crm.send_email ({i})"
                if action
                else f"{skill} finished",
                body=f"Mail number {i}.",
                created_at=AT + timedelta(minutes=i),
                call_id=f"c{i}" if action else None,
                tool="crm.send_email" if action else None,
                args={"to": f"ann{i}@example.com"} if action else None,
                schema={"type": "object", "properties": {"to": {"type": "string"}}}
                if action
                else None,
            )
            made.append(
                await self.store.create_item(item, targets=[], lease=None, now=item.created_at)
            )
        return made

    def published(self, user: str) -> list[Call]:
        return self.slack.calls_to("views.publish", user_id=user)

    async def opened(self, user: str, count: int = 1) -> Call:
        """Open the tab and wait for the view Bolt publishes after its ack."""
        r = await self.open(user)
        assert r.status_code == 200
        calls = await self.slack.wait_for(
            "views.publish", lambda c: c.args.get("user_id") == user, count=count
        )
        return calls[-1]


@pytest.fixture
async def home(tmp_path: Path) -> AsyncIterator[Home]:
    async with SlackApi() as slack:
        engine = connect(f"sqlite+aiosqlite:///{tmp_path / 'home.db'}")
        await upgrade(engine)
        store = SqlStore(engine)
        skills = SkillBook({"sales": skill("sales", [APPROVER]), "ops": skill("ops", ["U2"])})
        core = build(
            store=store, skills=skills, channels={}, mind=None, clock=lambda: AT + timedelta(days=1)
        )
        client = AsyncWebClient(token="xoxb-test", base_url=slack.url)
        inbound = SlackInbound(
            inbox=core.inbox,
            runs=core.runs,
            store=store,
            skills=skills,
            access=Access(skills=skills),
            base_url=BASE,
        )
        tabs = HomeTabs(client=client, inbound=inbound, debounce=0)
        bolt = build_app(client=client, signing_secret=SECRET, inbound=inbound, home=tabs)
        handler = AsyncSlackRequestHandler(bolt)
        app = FastAPI()

        @app.post("/slack/events")
        async def events(request: Request) -> Response:
            response: Response = await handler.handle(request)
            return response

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://pizza.test") as http:
            yield Home(slack, store, core.inbox, tabs, http, core.runs)
        slack.check()
        await store.aclose()


def shown(call: Call) -> str:
    return json.dumps(call.args["view"], ensure_ascii=False)


async def test_a_hundred_pending_items_fit_the_home_tab_and_the_rest_are_counted(
    home: Home,
) -> None:
    await home.add_items("sales", 100)
    await home.add_items("sales", 15, box=Box.UNREAD)
    await home.add_items("ops", 5)  # U1 may not decide these: not in their Home

    call = await home.opened(APPROVER)
    view = call.args["view"]
    assert view["type"] == "home" and len(view["blocks"]) <= 100
    text = shown(call)
    assert "Action (100)" in text and "Unread (15)" in text
    assert "…and 80 more on the <http://pizza.example/|web page>" in text
    assert "…and 5 more on the <http://pizza.example/|web page>" in text
    assert "ops wants to run" not in text
    # The newest first, each with the card's own buttons.
    rows = [b for b in view["blocks"] if b["type"] == "actions" and b["block_id"] != "home:start"]
    assert len(rows) == 20
    assert rows[0]["block_id"] == "decide:sales-action-099"
    assert [e["action_id"] for e in rows[0]["elements"]] == [
        "pizza_approve",
        "pizza_edit",
        "pizza_reject",
    ]
    assert "pizza_start" in text  # an approver of some skill may start runs
    home.slack.check()


async def test_a_refresh_reads_the_boxes_a_page_at_a_time_and_lets_other_work_go_between(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(home_tab, "PAGE", 30)
    await home.add_items("sales", 100)
    await home.add_items("sales", 15, box=Box.UNREAD)
    reads = count_item_reads(home.store, monkeypatch)
    # Other work on the event loop (a decision, a card's update): what it sees of the
    # refresh each time it gets to run.
    seen: list[int] = []
    refresh = asyncio.create_task(home.tabs.refresh())
    while not refresh.done():
        seen.append(len(reads))
        await asyncio.sleep(0)
    await refresh

    assert reads == [30, 30, 30, 10, 15]  # pending in four pages, then Unread
    assert any(0 < n < len(reads) for n in seen)  # it ran while the refresh was under way
    text = shown(home.published(APPROVER)[-1])
    assert "Action (100)" in text and "Unread (15)" in text
    assert "…and 80 more on the <http://pizza.example/|web page>" in text


async def test_a_refresh_gives_way_to_a_conversation_with_a_peer_held_meanwhile(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A card's update talks with its peer (SMTP is several round trips): each answer that
    comes while the refresh reads or sorts a page is taken before the refresh's next page."""
    monkeypatch.setattr(home_tab, "PAGE", 30)
    # Long enough for the peer's answer on any machine; a server's pause is far shorter.
    monkeypatch.setattr(home_tab, "GIVE_WAY", 0.2)
    await home.add_items("sales", 100)
    reads = count_item_reads(home.store, monkeypatch)
    checks: list[int] = []
    may_see = home.tabs.inbound.access.may_see
    monkeypatch.setattr(
        home.tabs.inbound.access, "may_see", lambda *a: checks.append(1) or may_see(*a)
    )
    peer = await asyncio.create_subprocess_exec(  # a peer outside this process: it echoes
        "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert peer.stdin is not None and peer.stdout is not None
    refresh = asyncio.create_task(home.tabs.refresh())
    meanwhile: list[tuple[int, int]] = []  # pages read, items sorted, while an answer came
    try:
        while not refresh.done():
            read, sorted_ = len(reads), len(checks)
            peer.stdin.write(b"ping\n")
            await peer.stdin.drain()
            assert await peer.stdout.readline() == b"ping\n"
            meanwhile.append((len(reads) - read, len(checks) - sorted_))
        await refresh
    finally:
        peer.kill()
        await peer.wait()

    assert len(reads) == 5  # four pages of pending, one of Unread
    assert len(checks) == 200  # each pending item, for each of the two who may start runs
    assert len(meanwhile) > 5  # the conversation went on throughout the refresh
    assert all(pages <= 1 and items <= 30 for pages, items in meanwhile), str(meanwhile)
    assert "Action (100)" in shown(home.published(APPROVER)[-1])


async def test_an_unread_note_is_marked_by_how_its_run_ended(home: Home) -> None:
    run = await home.runs.start("sales", "mail Ann", trigger="test", by=Principal.owner("api"))
    await home.runs.cancel(run.id, by=Principal.owner("api"))
    await home.add_items("sales", 1, box=Box.UNREAD)  # its run has not ended: no verdict
    text = shown(await home.opened(APPROVER))
    assert "⚠️ *sales was cancelled*" in text
    assert "ℹ️ *sales finished*" in text  # the title says finished; the run does not
    assert "✅" not in text


async def test_someone_with_no_role_sees_an_empty_home_without_a_start_button(
    home: Home,
) -> None:
    await home.add_items("sales", 2)
    text = shown(await home.opened("U9"))
    assert "Nothing waits for your decision." in text and "Nothing unread." in text
    assert "pizza_start" not in text and "sales wants to run" not in text


async def test_the_home_tab_is_republished_only_when_the_persons_items_change(
    home: Home,
) -> None:
    items = await home.add_items("sales", 3)
    await home.tabs.opened(APPROVER, published_before=False)
    assert len(home.published(APPROVER)) == 1
    # A pass publishes the tabs of everyone who may start runs (U2 too), but U1's has nothing
    # new: it is not sent again, and Slack still shows the last one.
    assert await home.tabs.refresh() == 1
    assert len(home.published(APPROVER)) == 1 and len(home.published("U2")) == 1
    assert await home.tabs.refresh() == 0

    await home.inbox.decide(items[0].id, Approve(), by=Principal.of("slack", APPROVER))
    assert await home.tabs.refresh() == 1  # U1's tab changed; nobody else's did
    latest = home.published(APPROVER)[-1]
    assert items[0].id not in shown(latest) and items[1].id in shown(latest)
    assert "Action (2)" in shown(latest)
    assert await home.tabs.refresh() == 0


async def test_a_rate_limited_publish_is_sent_again_on_the_next_pass(home: Home) -> None:
    await home.add_items("sales", 1)
    home.slack.fail_next(1, status=429, retry_after=1, methods={"views.publish"})
    await home.tabs.opened(APPROVER, published_before=False)
    assert home.published(APPROVER) == []
    assert await home.tabs.refresh() == 2  # U1's, again, and U2's
    assert len(home.published(APPROVER)) == 1
