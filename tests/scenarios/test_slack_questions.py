"""Question items in Slack: the card the outbox posts, the answer modal its button opens, the
decline modal, a link question's Done, and the card updated with who answered what.

The real Bolt app over HTTP (correctly signed interaction payloads through Bolt's FastAPI
handler), a real SQLite store, the outbox with the `SlackChannel`, and Slack's Web API played
by the local recorder, whose every payload is checked against Slack's limits. The question
items are made in the store as a run's tool would make them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.addresses import SlackTarget
from pizzabot.agent.argforms import form_fields
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.agent.outbox import Limits
from pizzabot.agent.policy import Access
from pizzabot.agent.questions import FREE_TEXT_SCHEMA
from pizzabot.agent.skills import Skill, SkillBook
from pizzabot.bot.core import Core, Timing, build
from pizzabot.channels.slack import SlackChannel, SlackInbound, blocks, build_app
from pizzabot.channels.slack.blocks import APPROVE, field_block
from pizzabot.channels.slack.home import HomeInbox, home_view
from pizzabot.channels.slack.questions import ANSWER, DECLINE, DONE, OPEN_LINK
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.peers.mcp_elicit import DEFAULTS
from tests.peers.slack_api import (
    Call,
    SlackApi,
    block_actions,
    checkbox_value,
    number_value,
    payload_problems,
    select_value,
    signed_headers,
    text_value,
    view_submission,
)
from tests.waiting import eventually

SECRET = "questions-signing-secret"
APPROVER = "U1"
BASE = "http://pizza.example"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "day": {"type": "string", "format": "date", "title": "Day"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 10, "title": "Seats"},
        "vegetarian": {"type": "boolean", "title": "Vegetarian"},
        "plan": {
            "type": "string",
            "title": "Plan",
            "oneOf": [
                {"const": "free", "title": "Free plan"},
                {"const": "pro", "title": "Pro plan"},
            ],
        },
        "toppings": {
            "type": "array",
            "title": "Toppings",
            "items": {"type": "string", "enum": ["cheese", "ham", "olives"]},
        },
    },
    "required": ["name", "seats"],
}


@dataclass
class Desk:
    """The Slack side of one server, in-process."""

    slack: SlackApi
    store: SqlStore
    core: Core
    http: httpx.AsyncClient

    async def question(
        self,
        *,
        schema: dict[str, Any] | None = SCHEMA,
        args: dict[str, Any] | None = None,
        title: str = "Book the table",
        body: str = "How should I book it?",
    ) -> Item:
        """A pending question of a running tool call, delivered to #C123 by the outbox."""
        ctx = self.core.ctx
        now = ctx.clock()
        run = await self.store.create_run(
            run_id=ctx.ids(), skill="sales", input="book a table", trigger="api", now=now
        )
        await self.store.set_status(run.id, RunStatus.RUNNING, lease=None, now=now)
        item = Item(
            id=ctx.ids(),
            run_id=run.id,
            skill="sales",
            box=Box.ACTION,
            kind=ItemKind.QUESTION,
            status=ItemStatus.PENDING,
            title=title,
            body=body,
            created_at=now,
            call_id="call-1",
            args=dict(args or {}),
            schema=schema,
            secret=ctx.secrets(),
        )
        made = await self.store.create_item(
            item, targets=[SlackTarget("C123")], lease=None, now=now
        )
        self.core.dispatcher.wake()
        return made

    async def card(self, item: Item) -> Call:
        [post] = await self.slack.wait_for("chat.postMessage", mentions(item.id))
        return post

    async def post(self, payload: dict[str, Any]) -> httpx.Response:
        body = urlencode({"payload": json.dumps(payload)})
        return await self.http.post(
            "/slack/events", content=body, headers=signed_headers(SECRET, body)
        )

    async def click(self, item: Item, post: Call, action: str, user: str = APPROVER) -> str:
        """Click a button of the card; the click's trigger_id."""
        payload = block_actions(
            action_id=action,
            value=item.id,
            user=user,
            channel=str(post.answer["channel"]),
            message_ts=str(post.answer["ts"]),
        )
        r = await self.post(payload)
        assert r.status_code == 200, r.text
        return str(payload["trigger_id"])

    async def opened(self, trigger: str) -> dict[str, Any]:
        [call] = await self.slack.wait_for(
            "views.open", lambda c: c.args.get("trigger_id") == trigger
        )
        view: dict[str, Any] = call.args["view"]
        return view

    async def submit(
        self, view: dict[str, Any], values: dict[str, Any], user: str = APPROVER
    ) -> httpx.Response:
        r = await self.post(view_submission(view=view, user=user, values=values))
        assert r.status_code == 200, r.text
        return r

    async def item_when(self, item_id: str, status: ItemStatus) -> Item:
        async def there() -> Item | None:
            item = await self.store.get_item(item_id)
            return item if item.status is status else None

        return await eventually(there, what=f"item {item_id} to be {status.value}")

    async def updated(self, post: Call, containing: str) -> Call:
        ts = post.answer["ts"]
        calls = await self.slack.wait_for(
            "chat.update", lambda c: c.args.get("ts") == ts and containing in shown(c)
        )
        return calls[-1]


def mentions(item_id: str) -> Any:
    return lambda c: item_id in json.dumps(c.args.get("blocks") or "")


def shown(call: Call) -> str:
    return json.dumps(call.args.get("blocks") or call.args.get("view"), ensure_ascii=False)


def by_name(schema: dict[str, Any], **values: dict[str, Any]) -> dict[str, Any]:
    """A modal's `state.values` from values by field name (each a block's action state)."""
    blocks = {f.name: field_block(i) for i, f in enumerate(form_fields(schema, {}))}
    return {blocks[name]: value for name, value in values.items()}


def sales() -> Skill:
    return Skill.model_validate(
        {
            "name": "sales",
            "instructions": "Help.",
            "model": "openai/none",
            "approvers": {"slack": [APPROVER]},
            "deliver": {"slack": "C123"},
        }
    )


@pytest.fixture
async def desk(tmp_path: Path) -> AsyncIterator[Desk]:
    async with SlackApi() as slack:
        engine = connect(f"sqlite+aiosqlite:///{tmp_path / 'questions.db'}")
        await upgrade(engine)
        store = SqlStore(engine)
        skills = SkillBook({"sales": sales()})
        client = AsyncWebClient(token="xoxb-test", base_url=slack.url)
        channel = SlackChannel(client=client, store=store, base_url=BASE)
        core = build(
            store=store,
            skills=skills,
            channels={"slack": channel},
            mind=None,
            base_url=BASE,
            timing=Timing(poll_interval=0.1, outbox=Limits(backoff_base=0.05)),
        )
        outbox = asyncio.create_task(core.dispatcher.run_forever())
        inbound = SlackInbound(
            inbox=core.inbox,
            runs=core.runs,
            store=store,
            skills=skills,
            access=Access(skills=skills),
            base_url=BASE,
        )
        bolt = build_app(client=client, signing_secret=SECRET, inbound=inbound)
        handler = AsyncSlackRequestHandler(bolt)
        app = FastAPI()

        @app.post("/slack/events")
        async def events(request: Request) -> Response:
            response: Response = await handler.handle(request)
            return response

        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://pizza.test") as h:
                yield Desk(slack, store, core, h)
            slack.check()
        finally:
            outbox.cancel()
            with contextlib.suppress(BaseException):
                await outbox
            await store.aclose()


async def test_a_question_is_answered_in_a_modal_and_the_values_arrive_typed(desk: Desk) -> None:
    item = await desk.question(
        title="Book the table <!channel>", body="For <https://evil.example|the boss> & co"
    )
    post = await desk.card(item)
    text = shown(post)
    assert "sales: question" in text
    # The asker's text is shown, never read as markup: no mention, no link of its own.
    assert "Book the table &lt;!channel&gt;" in text
    assert "For &lt;https://evil.example|the boss&gt; &amp; co" in text
    assert "<!channel>" not in post.args["text"]
    assert "*Seats*" in text and "*Toppings*" in text
    [row] = [b for b in post.args["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in row["elements"]] == [ANSWER, DECLINE]

    view = await desk.opened(await desk.click(item, post, ANSWER))
    assert view["callback_id"] == "pizza_edit_view" and item.id in view["private_metadata"]
    assert view["title"]["text"] == "Answer" and view["submit"]["text"] == "Send"
    elements = {b["label"]["text"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert elements["Email"]["type"] == "email_text_input"
    assert elements["Day"]["type"] == "datepicker"
    assert elements["Seats"]["type"] == "number_input"
    assert elements["Vegetarian"]["type"] == "checkboxes"
    plans = [(o["text"]["text"], o["value"]) for o in elements["Plan"]["options"]]
    assert ("Free plan", "free") in plans and ("Pro plan", "pro") in plans
    assert elements["Toppings"]["type"] == "multi_static_select"

    picked = [{"text": {"type": "plain_text", "text": t}, "value": t} for t in ("cheese", "olives")]
    r = await desk.submit(
        view,
        by_name(
            SCHEMA,
            name=text_value("Ann"),
            email={"value": {"type": "email_text_input", "value": "ann@example.com"}},
            day={"value": {"type": "datepicker", "selected_date": "2026-12-24"}},
            seats=number_value("3"),
            vegetarian=checkbox_value(True),
            plan=select_value("pro"),
            toppings={"value": {"type": "multi_static_select", "selected_options": picked}},
        ),
    )
    assert not r.content  # closed: no errors to show

    answered = await desk.item_when(item.id, ItemStatus.EDITED)
    assert answered.final_args == {
        "name": "Ann",
        "email": "ann@example.com",
        "day": "2026-12-24",
        "seats": 3,
        "vegetarian": True,
        "plan": "pro",
        "toppings": ["cheese", "olives"],
    }
    assert (answered.decided_by, answered.decided_via) == (APPROVER, "slack")
    update = await desk.updated(post, "Answered by <@U1> via slack")
    text = shown(update)
    assert "sales: answered" in text
    assert "*Plan*: Pro plan" in text and "*Toppings*: cheese, olives" in text
    assert "*Vegetarian*: yes" in text and "*Seats*: 3" in text
    assert not [b for b in update.args["blocks"] if b["type"] == "actions"]


async def test_a_wrong_value_is_shown_on_its_field_and_nothing_is_answered(desk: Desk) -> None:
    item = await desk.question()
    post = await desk.card(item)
    view = await desk.opened(await desk.click(item, post, ANSWER))
    r = await desk.submit(view, by_name(SCHEMA, name=text_value("Ann"), seats=number_value("11")))
    answer = r.json()
    assert answer["response_action"] == "errors"
    seats = by_name(SCHEMA, seats={})
    [(block, message)] = answer["errors"].items()
    assert block in seats and "10" in message
    assert (await desk.store.get_item(item.id)).status is ItemStatus.PENDING

    # The same modal, corrected: the answer counts.
    await desk.submit(view, by_name(SCHEMA, name=text_value("Ann"), seats=number_value("10")))
    answered = await desk.item_when(item.id, ItemStatus.EDITED)
    assert answered.final_args == {"name": "Ann", "seats": 10, "vegetarian": False}


async def test_declining_asks_for_a_reason_the_asker_reads(desk: Desk) -> None:
    item = await desk.question()
    post = await desk.card(item)
    view = await desk.opened(await desk.click(item, post, DECLINE))
    assert view["callback_id"] == "pizza_reject_view" and view["title"]["text"] == "Decline"
    await desk.submit(view, {"reason": text_value("We eat at home tonight.")})

    declined = await desk.item_when(item.id, ItemStatus.REJECTED)
    assert declined.reason == "We eat at home tonight." and declined.decided_by == APPROVER
    update = await desk.updated(post, "Declined by <@U1> via slack")
    assert "We eat at home tonight." in shown(update) and "sales: declined" in shown(update)


async def test_a_question_in_words_is_one_multiline_field(desk: Desk) -> None:
    item = await desk.question(schema=FREE_TEXT_SCHEMA, title="Which day suits you?")
    post = await desk.card(item)
    view = await desk.opened(await desk.click(item, post, ANSWER))
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["element"]["type"] == "plain_text_input" and field["element"]["multiline"]

    await desk.submit(view, {field["block_id"]: text_value("Tuesday,\nafter six")})
    answered = await desk.item_when(item.id, ItemStatus.EDITED)
    assert answered.final_args == {"answer": "Tuesday,\nafter six"}
    await desk.updated(post, "Answered by <@U1> via slack")


async def test_a_modal_answer_keeps_the_defaults_of_the_fields_left_alone(desk: Desk) -> None:
    item = await desk.question(schema=DEFAULTS)
    post = await desk.card(item)
    view = await desk.opened(await desk.click(item, post, ANSWER))
    elements = {b["label"]["text"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert elements["Age"]["initial_value"] == "30"  # the modal opens with the defaults
    assert elements["Verified"]["initial_options"]
    # Slack sends a checkbox's state as shown, and only the inputs a person filled.
    sent = by_name(DEFAULTS, name=text_value("Ann"), verified=checkbox_value(True))
    await desk.submit(view, sent)
    answered = await desk.item_when(item.id, ItemStatus.EDITED)
    assert answered.final_args == {
        "name": "Ann",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }


async def test_a_link_question_shows_where_it_leads_and_done_accepts_it(desk: Desk) -> None:
    url = "https://accounts.example.com/connect?a=1&b=<!channel>|x"
    item = await desk.question(schema=None, args={"url": url}, title="Connect your calendar")
    post = await desk.card(item)
    text = shown(post)
    # The domain the browser really opens, in bold, and what opening means, before any click.
    assert "Opens *example.com* (host `accounts.example.com`)" in text
    assert "Slack does not ask first" in text
    assert "<!channel>" not in text and "|x>" not in text
    [row] = [b for b in post.args["blocks"] if b["type"] == "actions"]
    buttons = {e["action_id"]: e for e in row["elements"]}
    assert list(buttons) == [OPEN_LINK, DONE, DECLINE] and DONE == APPROVE
    assert buttons[OPEN_LINK]["url"].startswith("https://accounts.example.com/connect?a=1&b=")
    assert "|" not in buttons[OPEN_LINK]["url"] and "<" not in buttons[OPEN_LINK]["url"]

    await desk.click(item, post, OPEN_LINK)  # Slack reports the URL button: acknowledged
    await desk.click(item, post, DONE)
    done = await desk.item_when(item.id, ItemStatus.APPROVED)
    assert done.decided_by == APPROVER
    update = await desk.updated(post, "Done by <@U1> via slack")
    assert "Opens *example.com*" in shown(update)


async def test_only_an_approver_may_open_the_answer_form(desk: Desk) -> None:
    item = await desk.question()
    post = await desk.card(item)
    trigger = await desk.click(item, post, ANSWER, user="U9")
    [note] = await desk.slack.wait_for("chat.postEphemeral", lambda c: c.args.get("user") == "U9")
    assert "nothing was decided" in str(note.args["text"])
    assert not desk.slack.calls_to("views.open", trigger_id=trigger)
    assert (await desk.store.get_item(item.id)).status is ItemStatus.PENDING


async def test_the_home_tab_offers_a_question_its_own_buttons(desk: Desk) -> None:
    item = await desk.question()
    view = home_view(HomeInbox(actions=[item], unread=[], may_start=False), base_url=BASE)
    text = json.dumps(view)
    assert "*sales*: question" in text
    rows = [b for b in view["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in rows[0]["elements"]] == [ANSWER, DECLINE]


async def test_a_proposed_time_slack_cannot_pick_is_typed_and_checked_on_its_field(
    desk: Desk,
) -> None:
    schema = {
        "type": "object",
        "properties": {"at": {"type": "string", "format": "date-time", "title": "At"}},
        "required": ["at"],
    }
    item = await desk.question(schema=schema, args={"at": "tomorrow at seven"})
    post = await desk.card(item)
    assert "*Proposed answer*" in shown(post) and "*At*: tomorrow at seven" in shown(post)
    view = await desk.opened(await desk.click(item, post, ANSWER))
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    # A date-and-time picker could not show the proposal: it stays a text box, prefilled.
    assert field["element"]["type"] == "plain_text_input"
    assert field["element"]["initial_value"] == "tomorrow at seven"

    r = await desk.submit(view, {field["block_id"]: text_value("tomorrow at seven")})
    answer = r.json()
    assert answer["response_action"] == "errors"
    assert "date and time" in answer["errors"][field["block_id"]]
    assert (await desk.store.get_item(item.id)).status is ItemStatus.PENDING

    await desk.submit(view, {field["block_id"]: text_value("2026-12-07T20:00:00+01:00")})
    answered = await desk.item_when(item.id, ItemStatus.EDITED)
    assert answered.final_args == {"at": "2026-12-07T20:00:00+01:00"}

    # Without a proposal, Slack's picker: it sends seconds since the epoch, answered as
    # RFC 3339 in UTC.
    item = await desk.question(schema=schema)
    post = await desk.card(item)
    view = await desk.opened(await desk.click(item, post, ANSWER))
    [field] = [b for b in view["blocks"] if b["type"] == "input"]
    assert field["element"]["type"] == "datetimepicker"
    picked = {"value": {"type": "datetimepicker", "selected_date_time": 1796670000}}
    await desk.submit(view, {field["block_id"]: picked})
    answered = await desk.item_when(item.id, ItemStatus.EDITED)
    assert answered.final_args == {"at": "2026-12-07T19:00:00Z"}


def link_card(url: str) -> list[dict[str, Any]]:
    item = Item(
        id="q9",
        run_id="r9",
        skill="sales",
        box=Box.ACTION,
        kind=ItemKind.QUESTION,
        status=ItemStatus.PENDING,
        title="Sign in",
        body="",
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
        args={"url": url},
        schema=None,
    )
    shown = blocks.message(item, base_url=BASE).blocks
    assert payload_problems("chat.postMessage", {"text": "Sign in", "blocks": shown}) == []
    return shown


def test_an_international_domain_shows_in_ascii_and_other_schemes_get_no_button() -> None:
    shown = link_card("https://bаnk.example/über")  # a Cyrillic "а" in the name
    text = json.dumps(shown, ensure_ascii=False)
    assert "Opens *xn--" in text and "bаnk" not in text
    [row] = [b for b in shown if b["type"] == "actions"]
    [opener] = [e for e in row["elements"] if e["action_id"] == OPEN_LINK]
    assert opener["url"].startswith("https://xn--") and opener["url"].isascii()

    shown = link_card("javascript:alert(1)")
    assert "not offered here: only a link starting https:// is offered" in json.dumps(shown)
    [row] = [b for b in shown if b["type"] == "actions"]
    assert OPEN_LINK not in [e["action_id"] for e in row["elements"]]
