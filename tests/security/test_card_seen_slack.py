"""A decision on Slack counts only for what its person saw, wherever they saw it: the edit
modal and the Home tab, against a real `pizzabot serve` process, Slack's Web API played by
the local recorder, and correctly signed interaction payloads.

The attack: Alice opens a deploy's edit or reject form, or looks at it in her Home tab;
meanwhile Bob edits the call (a new version: the digest her forms and buttons carry no
longer matches). Her submit or click, made on what she saw, must not decide the edited call:
she is told the card changed, nothing is decided, and she is shown the call as it is now.
The forms and the Home tab show what their digest binds: the arguments and who asked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from tests.peers.server import ServerProcess
from tests.peers.slack_api import (
    Call,
    SlackApi,
    app_home_opened,
    block_actions,
    button_value,
    field_blocks,
    filled_values,
    home_block_actions,
    http_mode_env,
    post_event,
    post_interaction,
    text_value,
    view_submission,
)
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "c4rd5een5ecret0123456789abcdef00"
ALICE, BOB = "U0ALICE", "U0BOB"
DEPLOYS = {
    "name": "deploys",
    "people": {"alice": {"slack": ALICE}, "bob": {"slack": BOB}},
    "approvers": ["alice", "bob"],
    "deliver": {"slack": "C0DEPLOY"},
    "tools": {"deploy.prod": {"policy": "ask", "approvals": {"required": 2}}},
}
SCHEMA = {
    "type": "object",
    "properties": {"version": {"type": "string"}, "env": {"type": "string"}},
    "required": ["version", "env"],
}
BOBS_EDIT = {"version": "6.6.6-backdoor", "env": "prod"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(
    slack: SlackApi, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerProcess]:
    root: Path = tmp_path_factory.mktemp("card-seen-slack")
    skills = root / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(DEPLOYS))
    env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example")
    proc = ServerProcess(data_dir=root / "data", skills_dir=skills, env=env)
    await proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(autouse=True)
def slack_accepts_every_payload(slack: SlackApi) -> Iterator[None]:
    """Every story ends with Slack accepting everything the server sent it so far."""
    yield
    slack.check()


async def token(server: ServerProcess, name: str, scope: str, person: str | None = None) -> str:
    body = {"name": name, "scope": scope, **({"person": person} if person else {})}
    async with server.client() as c:
        r = await c.post("/api/tokens", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["token"])


async def ask(server: ServerProcess, agent: str, version: str) -> dict[str, Any]:
    """An agent asks to deploy `version` to staging; its item as the API shows it."""
    body = {
        "skill": "deploys",
        "title": f"Ship {version}",
        "tool": "deploy.prod",
        "args": {"version": version, "env": "staging"},
        "schema": SCHEMA,
    }
    async with server.client(agent) as c:
        r = await c.post("/api/requests", json=body)
    assert r.status_code == 201, r.text
    return await item_now(server, str(r.json()["item_id"]))


async def item_now(server: ServerProcess, item_id: str) -> dict[str, Any]:
    async with server.client() as c:
        r = await c.get(f"/api/items/{item_id}")
    assert r.status_code == 200, r.text
    item: dict[str, Any] = r.json()
    return item


async def bob_edits(server: ServerProcess, item_id: str) -> dict[str, Any]:
    """Bob edits the call from his terminal: his approval, on a new version of the card."""
    bob = await token(server, f"bob-{item_id}", "decide", person="bob")
    async with server.client(bob) as c:
        r = await c.post(
            f"/api/items/{item_id}/decision", json={"decision": "edit", "args": BOBS_EDIT}
        )
    assert r.status_code == 200 and r.json()["status"] == "pending", r.text
    edited: dict[str, Any] = r.json()
    assert edited["version"] == 2 and edited["risk"]["approved"] == ["bob via the API"]
    return edited


def text(call: Call) -> str:
    return json.dumps(call.args.get("blocks") or call.args.get("view") or "", ensure_ascii=False)


async def card_of(slack: SlackApi, item_id: str) -> Call:
    [post] = await slack.wait_for("chat.postMessage", lambda c: item_id in text(c))
    return post


async def card_shows(slack: SlackApi, post: Call, digest: str) -> Call:
    """The card's update that carries the item's digest `digest`: the card as it is now."""
    ts = post.answer["ts"]
    calls = await slack.wait_for(
        "chat.update", lambda c: c.args.get("ts") == ts and digest in text(c)
    )
    return calls[-1]


async def told(slack: SlackApi, method: str, user: str, words: str, *, count: int = 1) -> Call:
    """The `count`-th note to `user` saying `words`."""
    key = "user" if method == "chat.postEphemeral" else "channel"
    calls = await slack.wait_for(
        method,
        lambda c: c.args.get(key) == user and words in str(c.args.get("text")),
        count=count,
    )
    return calls[-1]


async def nothing_decided(server: ServerProcess, item_id: str, refusals: int = 1) -> None:
    now = await item_now(server, item_id)
    assert now["status"] == "pending" and now["args"] == BOBS_EDIT
    assert now["risk"]["approved"] == ["bob via the API"]
    async with server.client() as c:
        entries = (await c.get("/api/audit", params={"limit": 1000})).json()["items"]
    refused = [e for e in entries if e["item_id"] == item_id and e["action"] == "decision_refused"]
    assert [e["actor"] for e in refused] == [ALICE] * refusals
    assert all("card changed" in e["detail"]["why"] for e in refused)


async def modal(server: ServerProcess, slack: SlackApi, post: Call, action: str) -> Any:
    """Alice clicks `action` on the card `post`: the modal the server opens for her."""
    click = block_actions(
        action_id=action,
        value=button_value(post, action),
        user=ALICE,
        channel=str(post.answer["channel"]),
        message_ts=str(post.answer["ts"]),
    )
    r = await post_interaction(f"{server.url}/slack/events", click, secret=SECRET)
    assert r.status_code == 200
    [opened] = await slack.wait_for(
        "views.open", lambda c: c.args.get("trigger_id") == click["trigger_id"]
    )
    return opened.args["view"]


async def test_an_edit_form_opened_before_an_edit_decides_nothing_after_it(
    server: ServerProcess, slack: SlackApi
) -> None:
    agent = await token(server, "ship-agent-a", "ask")
    item = await ask(server, agent, "1.2.3")
    post = await card_of(slack, item["id"])
    events = f"{server.url}/slack/events"

    view = await modal(server, slack, post, "pizza_edit")
    shown = json.dumps(view["blocks"], ensure_ascii=False)
    # The form shows what it binds: the arguments (its inputs) and who asked.
    assert f"Requested by {item['requested_by']}" in shown and item["requested_by"]
    ids = field_blocks(item)
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert inputs[ids["version"]]["element"]["initial_value"] == "1.2.3"
    reject = await modal(server, slack, post, "pizza_reject")
    shown = json.dumps(reject["blocks"], ensure_ascii=False)
    assert "*version*: 1.2.3" in shown and f"Requested by {item['requested_by']}" in shown

    edited = await bob_edits(server, item["id"])
    values = filled_values(view, **{ids["env"]: "prod"})
    submitted = view_submission(view=view, user=ALICE, values=values)
    r = await post_interaction(events, submitted, secret=SECRET)
    assert r.status_code == 200 and not r.content  # the form closes; the refusal follows
    refusal = await told(slack, "chat.postEphemeral", ALICE, "card changed")
    assert "nothing was decided" in refusal.args["text"]
    await nothing_decided(server, item["id"])
    # Her reject form from before the edit decides nothing either.
    rejected = view_submission(view=reject, user=ALICE, values={"reason": text_value("no")})
    assert (await post_interaction(events, rejected, secret=SECRET)).status_code == 200
    await told(slack, "chat.postEphemeral", ALICE, "card changed", count=2)
    await nothing_decided(server, item["id"], refusals=2)

    # The card shows the call as it is now, with buttons for that version.
    update = await card_shows(slack, post, edited["digest"])
    assert "6.6.6-backdoor" in text(update)
    assert button_value(update, "pizza_approve") == f"{item['id']}:{edited['digest']}"


async def test_a_home_button_shown_before_an_edit_decides_nothing_after_it(
    server: ServerProcess, slack: SlackApi
) -> None:
    agent = await token(server, "ship-agent-b", "ask")
    item = await ask(server, agent, "2.0.0")
    post = await card_of(slack, item["id"])
    events = f"{server.url}/slack/events"

    assert (await post_event(events, app_home_opened(ALICE), secret=SECRET)).status_code == 200
    [home] = await slack.wait_for(
        "views.publish",
        lambda c: c.args.get("user_id") == ALICE and item["digest"] in text(c),
    )
    blocks = home.args["view"]["blocks"]
    [at] = [n for n, b in enumerate(blocks) if b.get("block_id") == f"decide:{item['id']}"]
    row = json.dumps(blocks[at - 2 : at], ensure_ascii=False)
    # The row shows what its buttons bind: the arguments and who asked.
    assert "*version*: 2.0.0" in row and "*env*: staging" in row
    assert f"Requested by {item['requested_by']}" in row
    [approve] = [e for e in blocks[at]["elements"] if e["action_id"] == "pizza_approve"]
    assert approve["value"] == f"{item['id']}:{item['digest']}"

    edited = await bob_edits(server, item["id"])
    stale = home_block_actions(action_id="pizza_approve", value=approve["value"], user=ALICE)
    assert (await post_interaction(events, stale, secret=SECRET)).status_code == 200
    refusal = await told(slack, "chat.postMessage", ALICE, "card changed")
    assert "nothing was decided" in refusal.args["text"]
    await nothing_decided(server, item["id"])

    # Her Home tab shows the call as it is now, and its button there counts.
    [again] = (
        await slack.wait_for(
            "views.publish",
            lambda c: c.args.get("user_id") == ALICE and edited["digest"] in text(c),
        )
    )[-1:]
    assert "6.6.6-backdoor" in text(again) and item["digest"] not in text(again)
    await card_shows(slack, post, edited["digest"])
    fresh = home_block_actions(
        action_id="pizza_approve", value=f"{item['id']}:{edited['digest']}", user=ALICE
    )
    assert (await post_interaction(events, fresh, secret=SECRET)).status_code == 200

    async def decided() -> dict[str, Any] | None:
        now = await item_now(server, item["id"])
        return now if now["status"] == "edited" else None

    done = await eventually(decided, what="the edited call approved", context=server.log)
    assert done["final_args"] == BOBS_EDIT
    assert done["risk"]["approved"] == ["bob via the API", "alice via Slack"]
