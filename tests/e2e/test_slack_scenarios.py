"""Slack end to end in HTTP mode: a real server process, Slack's Web API played by a local
recorder, and correctly signed interaction payloads POSTed to `/slack/events`.

One server serves the whole module (starting one costs seconds); every story uses its own
run and finds its own messages by the item's id.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.peers.slack_api import (
    Call,
    SlackApi,
    app_home_opened,
    block_actions,
    button_value,
    checkbox_value,
    event_callback,
    field_blocks,
    home_block_actions,
    http_mode_env,
    message_ts,
    number_value,
    post_command,
    post_event,
    post_interaction,
    select_value,
    slash_command,
    text_value,
    view_submission,
)
from tests.peers.stack import Stack
from tests.peers.stories import EMAIL, send_then_summarise
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
APPROVER = "U1"
#: The thread of a click made after the story's others.
LATER_THREAD = "1700000000.000900"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(slack: SlackApi, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    root: Path = tmp_path_factory.mktemp("slack-http")
    env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
    skill = {"deliver": {"slack": "C123"}, "approvers": {"slack": [APPROVER]}}
    quiet = {"name": "quiet", "deliver": {"slack": "C999"}}  # no approvers: fail closed
    async with Stack(
        root, script=send_then_summarise, skill=skill, extra_skills=[quiet], env=env
    ) as st:
        yield st


@pytest.fixture(autouse=True)
def slack_accepts_every_payload(slack: SlackApi) -> Iterator[None]:
    """Every story ends with Slack accepting everything the server sent it so far."""
    yield
    slack.check()


def events_url(st: Stack) -> str:
    return f"{st.server.url}/slack/events"


def mentions(item_id: str) -> Any:
    return lambda c: item_id in json.dumps(c.args.get("blocks") or c.args.get("view") or "")


def block_text(call: Call) -> str:
    return json.dumps(call.args.get("blocks"), ensure_ascii=False)


async def posted_item(st: Stack, slack: SlackApi, text: str = "go") -> tuple[dict[str, Any], Call]:
    """Start a run and wait for its action item's Slack message."""
    run = await st.start_run("test", text)
    item = await st.wait_item(run["id"])
    [post] = await slack.wait_for("chat.postMessage", mentions(item["id"]))
    return item, post


async def get_item(st: Stack, item_id: str) -> dict[str, Any]:
    async with st.client() as c:
        r = await c.get(f"/api/items/{item_id}")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


async def wait_status(st: Stack, item_id: str, status: str) -> dict[str, Any]:
    async def decided() -> dict[str, Any] | None:
        item = await get_item(st, item_id)
        return item if item["status"] == status else None

    return await eventually(decided, what=f"item {item_id} to be {status}")


async def updated(slack: SlackApi, post: Call, containing: str) -> Call:
    ts = post.answer["ts"]
    calls = await slack.wait_for(
        "chat.update", lambda c: c.args.get("ts") == ts and containing in block_text(c)
    )
    return calls[-1]


async def audit(st: Stack) -> list[dict[str, Any]]:
    async with st.client() as c:
        entries: list[dict[str, Any]] = (await c.get("/api/audit")).json()["items"]
        return entries


def click(item_id: str, post: Call, action: str, user: str = APPROVER) -> dict[str, Any]:
    """A click on the `action` button of the message `post` made or updated, with the value
    Slack sends back: the button's own (the item and the card's digest)."""
    value = button_value(post, action)
    assert value.partition(":")[0] == item_id
    return block_actions(
        action_id=action,
        value=value,
        user=user,
        channel=str(post.answer["channel"]),
        message_ts=str(post.answer["ts"]),
    )


async def test_approve_by_button_updates_the_message_and_threads_the_result(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, post = await posted_item(st, slack, "send Ann the quote")
    assert post.token == "xoxb-test" and post.args["channel"] == "C123"
    assert "thread_ts" not in post.args  # the run's first message starts its thread
    shown = block_text(post)
    assert "test: approval needed" in shown
    assert "`send_email` on server `crm`" in shown
    assert "impact *high*" in shown and "*not reversible*" in shown and "scope *external*" in shown
    assert "*to*: ann@example.com" in shown
    assert f"http://pizza.example/items/{item['id']}" in shown
    [actions] = [b for b in post.args["blocks"] if b["type"] == "actions"]
    buttons = {e["action_id"]: e for e in actions["elements"]}
    assert buttons["pizza_approve"]["style"] == "primary"
    assert buttons["pizza_reject"]["style"] == "danger" and "confirm" in buttons["pizza_reject"]
    assert "pizza_edit" in buttons

    r = await post_interaction(
        events_url(st), click(item["id"], post, "pizza_approve"), secret=SECRET
    )
    assert r.status_code == 200

    decided = await wait_status(st, item["id"], "approved")
    assert decided["decided_by"] == APPROVER and decided["decided_via"] == "slack"
    [entry] = [e for e in await audit(st) if e["item_id"] == item["id"]]
    assert (entry["action"], entry["actor"], entry["channel"]) == ("decision", APPROVER, "slack")
    await st.wait_run(item["run_id"], {"done"})
    update = await updated(slack, post, "Approved by <@U1> via slack")
    assert not [b for b in update.args["blocks"] if b["type"] == "actions"]  # buttons gone

    ts = post.answer["ts"]
    [result] = await slack.wait_for(
        "chat.postMessage", lambda c: f"/runs/{item['run_id']}" in block_text(c)
    )
    assert result.args["thread_ts"] == ts and result.args["channel"] == "C123"
    assert "sent to ann@example.com" in block_text(result)
    assert "✅ test finished" in block_text(result)  # the run's own outcome marks it


async def test_edit_in_a_modal_shows_errors_inline_then_runs_the_edited_call(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, post = await posted_item(st, slack)
    clicked = click(item["id"], post, "pizza_edit")
    r = await post_interaction(events_url(st), clicked, secret=SECRET)
    assert r.status_code == 200
    [opened] = await slack.wait_for(
        "views.open", lambda c: c.args.get("trigger_id") == clicked["trigger_id"]
    )
    view = opened.args["view"]
    assert view["callback_id"] == "pizza_edit_view" and item["id"] in view["private_metadata"]
    ids = field_blocks(item)
    inputs = {
        name: b
        for b in view["blocks"]
        if b["type"] == "input"
        for name in ids
        if ids[name] == b["block_id"]
    }
    assert inputs["to"]["element"]["initial_value"] == "ann@example.com"
    assert inputs["to"]["optional"] is False
    assert inputs["priority"]["element"]["type"] == "static_select"
    assert inputs["priority"]["element"]["initial_option"]["value"] == "normal"
    assert inputs["copies"]["element"]["type"] == "number_input"
    assert inputs["receipt"]["element"]["type"] == "checkboxes"
    assert inputs["cc"]["optional"] is True

    values = {
        ids["to"]: text_value("bob@example.com"),
        ids["subject"]: text_value("Quote"),
        ids["body"]: text_value("Here is the new quote."),
        ids["priority"]: select_value("high"),
        ids["copies"]: number_value("50"),
        ids["cc"]: text_value(None),
        ids["receipt"]: checkbox_value(True),
    }
    bad = view_submission(view=view, user=APPROVER, values=values)
    r = await post_interaction(events_url(st), bad, secret=SECRET)
    assert r.status_code == 200
    answer = r.json()
    assert answer["response_action"] == "errors" and set(answer["errors"]) == {ids["copies"]}
    assert (await get_item(st, item["id"]))["status"] == "pending"

    values[ids["copies"]] = number_value("3")
    good = view_submission(view=view, user=APPROVER, values=values)
    r = await post_interaction(events_url(st), good, secret=SECRET)
    assert r.status_code == 200 and not r.content  # an empty ack closes the modal
    decided = await wait_status(st, item["id"], "edited")
    expected = {**EMAIL, "to": "bob@example.com", "body": "Here is the new quote."}
    expected.update(priority="high", copies=3, receipt=True)
    assert {k: decided["final_args"][k] for k in expected} == expected
    assert decided["final_args"].get("cc") is None
    await st.wait_run(item["run_id"], {"done"})
    update = await updated(slack, post, "Edited by <@U1> via slack")
    assert "*copies*: 3" in block_text(update) and "bob@example.com" in block_text(update)
    calls = [c for c in st.tool_calls() if c["args"].get("to") == "bob@example.com"]
    assert [c["args"]["copies"] for c in calls] == [3]


async def test_reject_with_a_reason(stack: Stack, slack: SlackApi) -> None:
    st = stack
    item, post = await posted_item(st, slack)
    clicked = click(item["id"], post, "pizza_reject")
    await post_interaction(events_url(st), clicked, secret=SECRET)
    [opened] = await slack.wait_for(
        "views.open", lambda c: c.args.get("trigger_id") == clicked["trigger_id"]
    )
    view = opened.args["view"]
    assert view["callback_id"] == "pizza_reject_view"
    values = {"reason": text_value("Ann already has it")}
    r = await post_interaction(
        events_url(st), view_submission(view=view, user=APPROVER, values=values), secret=SECRET
    )
    assert r.status_code == 200
    decided = await wait_status(st, item["id"], "rejected")
    assert decided["reason"] == "Ann already has it"
    await updated(slack, post, "Rejected by <@U1> via slack")
    update = await updated(slack, post, "Ann already has it")
    assert not [b for b in update.args["blocks"] if b["type"] == "actions"]


async def test_a_decision_on_the_api_updates_the_slack_message_and_stale_clicks_are_told(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, post = await posted_item(st, slack)
    r = await st.decide(item["id"], "approve")
    assert r.status_code == 200
    await updated(slack, post, "Approved by owner via api")

    stale = click(item["id"], post, "pizza_approve")
    r = await post_interaction(events_url(st), stale, secret=SECRET)
    assert r.status_code == 200
    [note] = await slack.wait_for(
        "chat.postEphemeral",
        lambda c: c.args.get("user") == APPROVER and "Already approved by owner" in c.args["text"],
    )
    assert note.args["channel"] == "C123"
    decisions = [e for e in await audit(st) if e["item_id"] == item["id"]]
    assert [e["action"] for e in decisions] == ["decision"]


async def test_a_non_approver_is_refused_and_nothing_is_decided(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    # Skills nobody may decide from Slack are named at start.
    log = st.server.log_path.read_text()
    assert "nobody can decide items of these skills from Slack" in log and "quiet" in log
    item, post = await posted_item(st, slack)
    r = await post_interaction(
        events_url(st), click(item["id"], post, "pizza_approve", user="U666"), secret=SECRET
    )
    assert r.status_code == 200
    [note] = await slack.wait_for("chat.postEphemeral", lambda c: c.args.get("user") == "U666")
    assert "approvers" in note.args["text"]
    # Edit is refused before any modal opens.
    clicked = click(item["id"], post, "pizza_edit", user="U666")
    await post_interaction(events_url(st), clicked, secret=SECRET)
    await slack.wait_for("chat.postEphemeral", lambda c: c.args.get("user") == "U666", count=2)
    assert not slack.calls_to("views.open", trigger_id=clicked["trigger_id"])
    assert (await get_item(st, item["id"]))["status"] == "pending"
    entries = [e for e in await audit(st) if e["item_id"] == item["id"]]
    refused = [(e["action"], e["actor"], e["detail"]["decision"]) for e in reversed(entries)]
    assert refused == [
        ("decision_refused", "U666", "approve"),
        ("decision_refused", "U666", "edit"),
    ]
    await st.decide(item["id"], "reject", reason="cleanup")


async def test_unsigned_or_replayed_requests_are_refused_with_no_decision(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, post = await posted_item(st, slack)
    payload = click(item["id"], post, "pizza_approve")
    unsigned = await post_interaction(events_url(st), payload, secret=None)
    assert unsigned.status_code == 401
    wrong = await post_interaction(events_url(st), payload, secret="not-the-secret")
    assert wrong.status_code == 401
    old = int(time.time()) - 10 * 60  # outside Slack's 5-minute window
    replayed = await post_interaction(events_url(st), payload, secret=SECRET, timestamp=old)
    assert replayed.status_code == 401
    # A 401 is answered before any listener runs, so nothing of these is left in flight.
    assert (await get_item(st, item["id"]))["status"] == "pending"
    assert not [e for e in await audit(st) if e["item_id"] == item["id"]]

    # The run ends with the item undecided: the message says so and loses its buttons.
    async with st.client() as c:
        assert (await c.post(f"/api/runs/{item['run_id']}/cancel")).status_code == 200
    update = await updated(slack, post, "Closed: the run ended")
    assert not [b for b in update.args["blocks"] if b["type"] == "actions"]


async def test_a_retried_interaction_makes_one_decision(stack: Stack, slack: SlackApi) -> None:
    st = stack
    item, post = await posted_item(st, slack)
    payload = click(item["id"], post, "pizza_approve")
    first, retry = await asyncio.gather(
        post_interaction(events_url(st), payload, secret=SECRET),
        post_interaction(events_url(st), payload, secret=SECRET, retry_num=1),
    )
    assert first.status_code == 200 and retry.status_code == 200
    await wait_status(st, item["id"], "approved")
    await st.wait_run(item["run_id"], {"done"})
    run = await st.get_run(item["run_id"])
    assert [e["kind"] for e in run["events"]].count("decision") == 1
    entries = [e for e in await audit(st) if e["item_id"] == item["id"]]
    assert [e["action"] for e in entries] == ["decision"]

    # A late retry is not told "already decided" (its first try decided); a new click is.
    def told() -> list[Call]:
        return [
            c
            for c in slack.calls_to("chat.postEphemeral", user=APPROVER)
            if "Already approved by <@U1>" in c.args["text"]
        ]

    before = len(told())
    r = await post_interaction(events_url(st), payload, secret=SECRET, retry_num=2)
    assert r.status_code == 200
    # The new click takes the retry's path and then answers, so once its answer is here the
    # retry has been handled too. It is clicked in a thread, which tells its answer apart.
    later = block_actions(
        action_id="pizza_approve",
        value=item["id"],
        user=APPROVER,
        channel=str(post.answer["channel"]),
        message_ts=str(post.answer["ts"]),
        thread_ts=LATER_THREAD,
    )
    await post_interaction(events_url(st), later, secret=SECRET)
    await slack.wait_for(
        "chat.postEphemeral", lambda c: c in told() and c.args.get("thread_ts") == LATER_THREAD
    )
    assert len(told()) == before + 1


async def test_slack_down_for_a_while_only_delays_the_message(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    slack.fail_next(1, status=500, methods={"chat.postMessage"})
    slack.fail_next(1, status=429, retry_after=3, methods={"chat.postMessage"})
    run = await st.start_run("test", "while Slack is down")
    item = await st.wait_item(run["id"])
    [post] = await slack.wait_for("chat.postMessage", mentions(item["id"]), timeout=30)
    failed = [c for c in slack.calls if c.method == "chat.postMessage" and c.status != 200]
    assert [c.status for c in failed[-2:]] == [500, 429]
    # The outbox waited at least as long as Slack's Retry-After asked (less the time the
    # rejected call itself took to be recorded).
    assert post.at - failed[-1].at >= 2.5
    assert post.args["channel"] == "C123"
    await st.decide(item["id"], "reject", reason="cleanup")


async def test_start_from_slash_command_and_follow_up_in_the_thread(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    command = slash_command(
        text="test please mail Ann", user=APPROVER, response_url=slack.response_url("cmd1")
    )
    r = await post_command(events_url(st), command, secret=SECRET)
    assert r.status_code == 200
    [answer] = await slack.wait_for("response_url", lambda c: "Started run" in c.args["text"])
    assert answer.args["response_type"] == "ephemeral" and "<#C123>" in answer.args["text"]
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    run = next(r for r in runs if r["input"] == "please mail Ann")
    assert run["trigger"] == "slack"
    item = await st.wait_item(run["id"])
    [post] = await slack.wait_for("chat.postMessage", mentions(item["id"]))
    await post_interaction(events_url(st), click(item["id"], post, "pizza_approve"), secret=SECRET)
    await st.wait_run(run["id"], {"done"})

    # A reply in the run's thread continues the run; Slack's retry of that event does not.
    reply = event_callback(
        {
            "type": "message",
            "channel": "C123",
            "channel_type": "channel",
            "user": APPROVER,
            "text": "also copy Bob",
            "ts": message_ts(),
            "thread_ts": post.answer["ts"],
        }
    )
    assert (await post_event(events_url(st), reply, secret=SECRET)).status_code == 200
    assert (await post_event(events_url(st), reply, secret=SECRET, retry_num=1)).status_code == 200
    # A later follow-up takes the retry's path, so once it is in the run the retry has been
    # handled too. It comes as Slack sends a private channel's (message.groups): heard alike.
    later = event_callback(
        {
            "type": "message",
            "channel": "C123",
            "channel_type": "group",
            "user": APPROVER,
            "text": "and thank Ann",
            "ts": message_ts(),
            "thread_ts": post.answer["ts"],
        }
    )
    assert (await post_event(events_url(st), later, secret=SECRET)).status_code == 200
    await st.server.wait_for(
        lambda c: _user_messages(c, run["id"], "and thank Ann", 1), what="the later follow-up"
    )
    await st.wait_run(run["id"], {"done"})
    assert await _user_messages_count(st, run["id"], "also copy Bob") == 1

    # Someone who is not the skill's approver cannot steer the run from its thread.
    stranger = event_callback(
        {
            "type": "message",
            "channel": "C123",
            "channel_type": "channel",
            "user": "U666",
            "text": "send it to me instead",
            "ts": message_ts(),
            "thread_ts": post.answer["ts"],
        }
    )
    assert (await post_event(events_url(st), stranger, secret=SECRET)).status_code == 200
    [note] = await slack.wait_for("chat.postEphemeral", lambda c: "steer" in c.args["text"])
    assert note.args["user"] == "U666" and note.args["thread_ts"] == post.answer["ts"]
    entries = [e for e in await audit(st) if e["action"] == "follow_up_refused"]
    assert [(e["actor"], e["channel"], e["run_id"]) for e in entries] == [
        ("U666", "slack", run["id"])
    ]
    assert await _user_messages_count(st, run["id"], "send it to me instead") == 0


async def test_who_may_start_runs_from_slack(stack: Stack, slack: SlackApi) -> None:
    st = stack
    command = slash_command(text="test hi", user="U666", response_url=slack.response_url("c2"))
    r = await post_command(events_url(st), command, secret=SECRET)
    assert r.status_code == 200 and "approvers" in r.json()["text"]
    await st.server.wait_for(
        lambda c: _audited(c, "start_refused", "U666"), what="the refusal in the audit trail"
    )
    # A DM from an approver starts a run of the named skill.
    dm = event_callback(
        {
            "type": "message",
            "channel": "D1",
            "channel_type": "im",
            "user": APPROVER,
            "text": "test look up Ann",
            "ts": message_ts(),
        }
    )
    assert (await post_event(events_url(st), dm, secret=SECRET)).status_code == 200
    [reply] = await slack.wait_for(
        "chat.postMessage",
        lambda c: c.args.get("channel") == "D1" and "Started run" in c.args["text"],
    )
    assert "of *test*" in reply.args["text"] and "thread_ts" not in reply.args
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    run = next(r for r in runs if r["input"] == "look up Ann")
    item = await st.wait_item(run["id"])
    await st.decide(item["id"], "reject", reason="cleanup")

    # An @mention in a channel starts a run too, answered in the mention's thread.
    ts = message_ts()
    mention = event_callback(
        {
            "type": "app_mention",
            "channel": "C777",
            "user": APPROVER,
            "ts": ts,
            "text": "<@UBOT> test find &lt;Bob&gt;",
        }
    )
    assert (await post_event(events_url(st), mention, secret=SECRET)).status_code == 200
    [reply] = await slack.wait_for(
        "chat.postMessage",
        lambda c: c.args.get("channel") == "C777" and c.args.get("thread_ts") == ts,
    )
    assert "Started run" in reply.args["text"]
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    run = next(r for r in runs if r["input"] == "find <Bob>")
    item = await st.wait_item(run["id"])
    await st.decide(item["id"], "reject", reason="cleanup")


async def _audited(client: Any, action: str, actor: str) -> bool:
    entries = (await client.get("/api/audit")).json()["items"]
    return any(e["action"] == action and e["actor"] == actor for e in entries)


async def _user_messages_count(st: Stack, run_id: str, text: str) -> int:
    run = await st.get_run(run_id)
    return sum(
        1 for e in run["events"] if e["kind"] == "user_message" and e["data"]["text"] == text
    )


async def _user_messages(client: Any, run_id: str, text: str, count: int) -> bool:
    r = await client.get(f"/api/runs/{run_id}")
    events = r.json()["events"]
    found = [e for e in events if e["kind"] == "user_message" and e["data"]["text"] == text]
    return len(found) >= count


async def test_the_home_tab_lists_a_persons_items_and_its_buttons_decide(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    item, _ = await posted_item(st, slack, "from the Home tab")
    r = await post_event(events_url(st), app_home_opened(APPROVER), secret=SECRET)
    assert r.status_code == 200
    published = await slack.wait_for(
        "views.publish",
        lambda c: c.args.get("user_id") == APPROVER and item["id"] in json.dumps(c.args["view"]),
    )
    home = published[-1]  # the Home may be published again as the card changes
    view = home.args["view"]
    assert view["type"] == "home"
    shown = json.dumps(view)
    assert "<http://pizza.example/|Open the web page>" in shown and "pizza_start" in shown
    [row] = [b for b in view["blocks"] if b.get("block_id") == f"decide:{item['id']}"]
    assert [e["action_id"] for e in row["elements"]] == [
        "pizza_approve",
        "pizza_edit",
        "pizza_reject",
        "pizza_grant",  # approve, and don't ask again for …
    ]

    # Someone who is no approver: the same refusal as on the card, told in a DM.
    forged = home_block_actions(action_id="pizza_approve", value=item["id"], user="U666")
    assert (await post_interaction(events_url(st), forged, secret=SECRET)).status_code == 200
    await slack.wait_for(
        "chat.postMessage",
        lambda c: c.args.get("channel") == "U666" and "approvers" in str(c.args.get("text")),
    )
    assert (await get_item(st, item["id"]))["status"] == "pending"

    click = home_block_actions(action_id="pizza_approve", value=item["id"], user=APPROVER)
    assert (await post_interaction(events_url(st), click, secret=SECRET)).status_code == 200
    decided = await wait_status(st, item["id"], "approved")
    assert (decided["decided_by"], decided["decided_via"]) == (APPROVER, "slack")
    # The tab is published again without the decided item.
    await slack.wait_for(
        "views.publish",
        lambda c: (
            c.args.get("user_id") == APPROVER
            and c.at > home.at
            and item["id"] not in json.dumps(c.args["view"])
        ),
    )
    await st.wait_run(item["run_id"], {"done"})


async def test_start_a_run_from_the_home_tab(stack: Stack, slack: SlackApi) -> None:
    st = stack
    # Only people who may start runs get the form.
    refused = home_block_actions(action_id="pizza_start", value="start", user="U666")
    assert (await post_interaction(events_url(st), refused, secret=SECRET)).status_code == 200
    await slack.wait_for(
        "chat.postMessage",
        lambda c: c.args.get("channel") == "U666" and "start runs" in str(c.args.get("text")),
    )
    assert not slack.calls_to("views.open", trigger_id=refused["trigger_id"])

    click = home_block_actions(action_id="pizza_start", value="start", user=APPROVER)
    assert (await post_interaction(events_url(st), click, secret=SECRET)).status_code == 200
    [opened] = await slack.wait_for(
        "views.open", lambda c: c.args.get("trigger_id") == click["trigger_id"]
    )
    view = opened.args["view"]
    assert view["callback_id"] == "pizza_start_view"
    [picker] = [b for b in view["blocks"] if b["block_id"] == "skill"]
    assert {o["value"] for o in picker["element"]["options"]} == {"test", "quiet"}

    empty = view_submission(
        view=view, user=APPROVER, values={"skill": select_value("test"), "input": text_value("")}
    )
    r = await post_interaction(events_url(st), empty, secret=SECRET)
    assert r.json()["response_action"] == "errors" and set(r.json()["errors"]) == {"input"}
    forged = view_submission(
        view=view,
        user="U666",
        values={"skill": select_value("test"), "input": text_value("sneak in")},
    )
    r = await post_interaction(events_url(st), forged, secret=SECRET)
    assert r.json()["response_action"] == "errors"

    good = view_submission(
        view=view,
        user=APPROVER,
        values={"skill": select_value("test"), "input": text_value("mail Ann from Home")},
    )
    r = await post_interaction(events_url(st), good, secret=SECRET)
    assert r.status_code == 200 and not r.content  # the modal closes
    [reply] = await slack.wait_for(
        "chat.postMessage",
        lambda c: c.args.get("channel") == APPROVER and "Started run" in str(c.args.get("text")),
    )
    assert "of *test*" in reply.args["text"]
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    assert not [r for r in runs if r["input"] == "sneak in"]
    run = next(r for r in runs if r["input"] == "mail Ann from Home")
    assert run["trigger"] == "slack"
    item = await st.wait_item(run["id"])
    await st.decide(item["id"], "reject", reason="cleanup")
