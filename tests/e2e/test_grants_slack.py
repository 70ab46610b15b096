"""Grants in Slack, end to end in HTTP mode: a real server, Slack's Web API played by a local
recorder, correctly signed clicks on the card's "Approve, and don't ask again" menu, and
`/pizza grants` with its Revoke buttons; the scripted model makes `crm.send_email` calls
through the real MCP tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.peers.grant_stories import asked, calls, calls_from_input, started
from tests.peers.slack_api import (
    Call,
    SlackApi,
    block_actions,
    http_mode_env,
    post_command,
    post_interaction,
    slash_command,
)
from tests.peers.stack import Stack
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
APPROVER = "U1"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(slack: SlackApi, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    root: Path = tmp_path_factory.mktemp("slack-grants")
    env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
    skill = {"deliver": {"slack": "C123"}, "approvers": {"slack": [APPROVER]}}
    async with Stack(root, script=calls_from_input, skill=skill, env=env) as st:
        yield st


def events_url(st: Stack) -> str:
    return f"{st.server.url}/slack/events"


async def card(st: Stack, slack: SlackApi, *mails: tuple[str, str]) -> tuple[str, str, Call]:
    """Start a run; its id, its first item's id and that item's Slack card."""
    run = await st.start_run("test", calls(*mails))
    item = await st.wait_item(run["id"], status="pending")
    [post] = await slack.wait_for(
        "chat.postMessage", lambda c: item["id"] in json.dumps(c.args.get("blocks") or "")
    )
    return run["id"], item["id"], post


def menu(post: Call) -> dict[str, Any]:
    """The card's "Approve, and don't ask again" menu."""
    for block in post.args["blocks"]:
        for element in block.get("elements") or []:
            if element.get("action_id") == "pizza_grant":
                return dict(element)
    raise AssertionError(f"no grant menu on the card: {post.args['blocks']}")


def choose(post: Call, choice: str, user: str = APPROVER) -> dict[str, Any]:
    """A click on the menu's option for `choice` ("ITEM:GRANT"), as Slack sends it: with the
    option's own value, which also carries the card's digest."""
    option = next(o for o in menu(post)["options"] if o["value"].startswith(choice + ":"))
    value = option["value"]
    payload = block_actions(
        action_id="pizza_grant",
        value=value,
        user=user,
        channel=str(post.answer["channel"]),
        message_ts=str(post.answer["ts"]),
    )
    payload["actions"] = [
        {
            "action_id": "pizza_grant",
            "block_id": payload["actions"][0]["block_id"],
            "type": "overflow",
            "selected_option": option,
            "action_ts": payload["actions"][0]["action_ts"],
        }
    ]
    return payload


async def slash_grants(st: Stack, slack: SlackApi, user: str = APPROVER) -> dict[str, Any]:
    command = slash_command(text="grants", user=user, response_url=slack.response_url("g"))
    r = await post_command(events_url(st), command, secret=SECRET)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def revoke_click(st: Stack, slack: SlackApi, grant_id: str) -> None:
    listing = await slash_grants(st, slack)
    buttons = [b["accessory"] for b in listing.get("blocks", []) if "accessory" in b]
    assert grant_id in [b["value"] for b in buttons if b["action_id"] == "pizza_revoke_grant"]
    click = block_actions(
        action_id="pizza_revoke_grant",
        value=grant_id,
        user=APPROVER,
        channel="C123",
        message_ts="1700000000.000100",
    )

    def revoked(call: Any) -> bool:
        return "Revoked" in call.args.get("text", "")

    # Counted, not just found: an earlier revoke's note must not stand for this one's.
    before = len([c for c in slack.calls_to("chat.postEphemeral") if revoked(c)])
    assert (await post_interaction(events_url(st), click, secret=SECRET)).status_code == 200
    notes = await slack.wait_for("chat.postEphemeral", revoked, count=before + 1)
    assert "asks again" in notes[-1].args["text"]


async def grant_list(st: Stack, **params: str) -> list[dict[str, Any]]:
    async with st.client() as c:
        items: list[dict[str, Any]] = (await c.get("/api/grants", params=params)).json()["items"]
        return items


async def test_grant_from_the_card_and_revoke_it_with_pizza_grants(
    stack: Stack, slack: SlackApi
) -> None:
    st = stack
    run_id, item_id, post = await card(st, slack, ("a@x.example", "one"))
    labels = [o["text"]["text"] for o in menu(post)["options"]]
    assert labels == [
        "Approve for this run",
        "Approve for 1h",
        "Approve for these exact arguments",
    ]
    await post_interaction(events_url(st), choose(post, f"{item_id}:1h"), secret=SECRET)
    await st.wait_run(run_id, {"done"})
    (hourly,) = await grant_list(st)
    assert (hourly["granted_by"], hourly["granted_via"], hourly["choice"]) == (
        APPROVER,
        "slack",
        "1h",
    )

    # While it holds, the next run's call goes ahead without a card.
    run = await st.start_run("test", calls(("b@x.example", "two")))
    run = await st.wait_run(run["id"], {"done", "waiting"})
    assert run["status"] == "done" and started(run)[0]["grant"] == hourly["id"]

    # `/pizza grants` lists it for its approver, not for someone who approves nothing.
    listing = await slash_grants(st, slack)
    assert "Grants in force" in listing["text"]
    shown = json.dumps(listing["blocks"], ensure_ascii=False)
    assert "crm.send_email" in shown and "used 1×" in shown
    stranger = await slash_grants(st, slack, user="U666")
    assert "blocks" not in stranger and "approvers" in stranger["text"]

    await revoke_click(st, slack, hourly["id"])
    assert (await grant_list(st)) == []
    (ended,) = await grant_list(st, all="true")
    assert ended["revoked_by"] == APPROVER

    # Revoked: the next call has a card again; for these exact arguments, then revoked.
    run_id, item_id, post = await card(st, slack, ("c@x.example", "three"))
    await post_interaction(events_url(st), choose(post, f"{item_id}:exact"), secret=SECRET)
    await st.wait_run(run_id, {"done"})
    (exact,) = await grant_list(st)
    run = await st.start_run("test", calls(("c@x.example", "three")))
    run = await st.wait_run(run["id"], {"done", "waiting"})
    assert run["status"] == "done" and started(run)[0]["grant"] == exact["id"]
    await revoke_click(st, slack, exact["id"])

    # For this run: the run's next call of the tool runs without a card.
    run_id, item_id, post = await card(st, slack, ("c@x.example", "three"), ("d@x.example", "4"))
    await post_interaction(events_url(st), choose(post, f"{item_id}:run"), secret=SECRET)
    run = await st.wait_run(run_id, {"done", "waiting"})
    assert run["status"] == "done" and asked(run) == ["three"]

    async def audited() -> list[str] | None:
        async with st.client() as c:
            entries = (await c.get("/api/audit")).json()["items"]
        actions = [e["action"] for e in entries if e["channel"] == "slack"]
        return actions if actions.count("grant revoked") == 2 else None

    actions = await eventually(audited, what="two revokes from Slack in the audit trail")
    assert "grant created" in actions
