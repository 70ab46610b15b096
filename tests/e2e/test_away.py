"""Away and delegation, end to end: a real server, Slack's Web API played by a local recorder,
signed clicks on the cards, requests filed through the API and `pizzabot away` on the
command line.

Alice and carol approve deploys; alice reads her cards in her Slack DMs. While she is away,
bob is her delegate: her cards come to bob's DMs, saying for whom, and bob decides them as
"bob for alice". Bob's own request is not his to approve, delegate or not. When her away
ends, her cards come to her again and bob decides nothing of hers."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.peers.server import TOKEN, ServerProcess
from tests.peers.slack_api import (
    Call,
    SlackApi,
    block_actions,
    button_value,
    http_mode_env,
    post_interaction,
)
from tests.peers.web import csrf_of
from tests.waiting import eventually

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
ALICE, BOB, CAROL, DAVE = "UALICE1", "UBOB1", "UCAROL1", "UDAVE1"
SKILL = {
    "name": "deploys",
    "people": {
        "alice": {"slack": ALICE, "email": "alice@corp.example"},
        "bob": {"slack": BOB, "email": "bob@corp.example"},
        "carol": {"slack": CAROL},
        "dave": {"slack": DAVE},
    },
    "approvers": {"people": ["alice", "carol"]},
    "deliver": {"slack": ALICE},
    "self_approval": False,
    "tools": {
        "deploy.prod": {"policy": "ask"},
        "deploy.big": {"policy": "ask", "approvals": {"required": 2}},
    },
}


def words(html: str) -> str:
    """A page's text as a person reads it."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def dm(user: str) -> str:
    """The direct-message conversation the recorder opens with `user`."""
    return "D" + user.lstrip("UW")


@asynccontextmanager
async def served(tmp_path: Path, **more: str) -> AsyncIterator[tuple[ServerProcess, SlackApi]]:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "deploys.yaml").write_text(yaml.safe_dump(SKILL))
    async with SlackApi() as slack:
        env = http_mode_env(slack.url, SECRET, PIZZABOT_PUBLIC_URL="http://pizza.example", **more)
        server = ServerProcess(data_dir=tmp_path / "data", skills_dir=skills, env=env)
        await server.start()
        try:
            yield server, slack
        finally:
            server.stop()


async def file_request(
    c: httpx.AsyncClient, title: str, tool: str = "deploy.prod"
) -> dict[str, Any]:
    r = await c.post(
        "/api/requests",
        json={"skill": "deploys", "title": title, "tool": tool, "args": {"v": title}},
    )
    assert r.status_code == 201, r.text
    made: dict[str, Any] = r.json()
    return made


async def card_of(slack: SlackApi, item_id: str) -> Call:
    [card] = await slack.wait_for(
        "chat.postMessage", lambda call: item_id in json.dumps(call.args.get("blocks") or "")
    )
    return card


async def click(
    server: ServerProcess, card: Call, user: str, action: str = "pizza_approve"
) -> None:
    payload = block_actions(
        action_id=action,
        value=button_value(card, action),
        user=user,
        channel=str(card.answer["channel"]),
        message_ts=str(card.answer["ts"]),
    )
    answer = await post_interaction(f"{server.url}/slack/events", payload, secret=SECRET)
    assert answer.status_code == 200, answer.text


async def told(slack: SlackApi, user: str, words: str) -> Call:
    [note] = await slack.wait_for(
        "chat.postEphemeral",
        lambda call: call.args.get("user") == user and words in str(call.args.get("text")),
    )
    return note


async def request_state(c: httpx.AsyncClient, request_id: str) -> dict[str, Any]:
    state: dict[str, Any] = (await c.get(f"/api/requests/{request_id}")).json()
    return state


async def token_for(c: httpx.AsyncClient, person: str) -> str:
    r = await c.post(
        "/api/tokens", json={"name": f"{person}-laptop", "scope": "decide", "person": person}
    )
    assert r.status_code == 201, r.text
    secret: str = r.json()["token"]
    return secret


async def pizzabot(
    server: ServerProcess, *args: str, token: str = TOKEN
) -> subprocess.CompletedProcess[str]:
    """`pizzabot ARGS…` against the server, as a terminal on another device runs it."""
    env = {
        **os.environ,
        "PIZZABOT_URL": server.url,
        "PIZZABOT_API_TOKEN": token,
        "COLUMNS": "200",
    }
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pizzabot.bot.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_delegate_decides_for_the_away_person_but_never_their_own_request(
    tmp_path: Path,
) -> None:
    async with served(tmp_path) as (server, slack), server.client() as owner:
        bob_token = await token_for(owner, "bob")
        until = datetime.now(UTC) + timedelta(hours=2)
        async with server.client(token=bob_token) as bob:
            # Bob may say he is away, but not that alice is: only an admin says it of others.
            r = await bob.post(
                "/api/away",
                json={"person": "alice", "delegate": "bob", "until": until.isoformat()},
            )
            assert r.status_code == 403, r.text
        r = await owner.post(
            "/api/away", json={"person": "alice", "delegate": "bob", "until": until.isoformat()}
        )
        assert r.status_code == 200, r.text
        assert [
            (a["person"], a["delegate"]) for a in (await owner.get("/api/away")).json()["items"]
        ] == [("alice", "bob")]

        # The owner's request: alice's card goes to bob's DMs, saying for whom.
        first = await file_request(owner, "1.2.3")
        card = await card_of(slack, first["item_id"])
        assert card.args["channel"] == dm(BOB)
        shown = json.dumps(card.args["blocks"])
        assert "For alice, who is away until" in shown and "bob decides in their place" in shown
        assert not [
            c for c in slack.calls_to("chat.postMessage") if c.args.get("channel") == dm(ALICE)
        ]

        # Dave is nobody's delegate: his click is refused.
        await click(server, card, DAVE)
        await told(slack, DAVE, "")
        assert (await request_state(owner, first["id"]))["status"] == "pending"

        # Bob approves it for alice; the request, its card and the audit say so.
        await click(server, card, BOB)

        async def approved() -> dict[str, Any] | None:
            state = await request_state(owner, first["id"])
            return state if state["status"] == "approved" else None

        state = await eventually(approved, what="the request approved", timeout=30)
        assert (state["decided_by"], state["via"]) == ("bob for alice", "slack")
        await slack.wait_for(
            "chat.update",
            lambda call: (
                call.args.get("ts") == card.answer["ts"]
                and "bob for alice" in json.dumps(call.args)
            ),
        )
        audit = (await owner.get("/api/audit")).json()["items"]
        assert any(e["action"] == "away_set" and e["detail"]["person"] == "alice" for e in audit)
        assert any(
            e["actor"] == "bob for alice" and e["item_id"] == first["item_id"] for e in audit
        )

        # Bob's own request comes to him as alice's delegate, and he may not approve it.
        async with server.client(token=bob_token) as bob:
            own = await file_request(bob, "1.2.4")
        own_card = await card_of(slack, own["item_id"])
        assert own_card.args["channel"] == dm(BOB)
        await click(server, own_card, BOB)
        await told(slack, BOB, "nobody approves their own request")
        assert (await request_state(owner, own["id"]))["status"] == "pending"
        refused = [
            e
            for e in (await owner.get("/api/audit")).json()["items"]
            if e["action"] == "decision_refused" and e["item_id"] == own["item_id"]
        ]
        assert refused and refused[0]["actor"] == "bob for alice"


async def test_a_delegates_digest_lists_the_cards_they_decide_for_someone(
    tmp_path: Path,
) -> None:
    digest = {
        "PIZZABOT_DIGEST_AT": "00:00",  # due all day: the first tick with a card sends it
        "PIZZABOT_DIGEST_TIMEZONE": "UTC",
        "PIZZABOT_DIGEST_INTERVAL": "0.5",
    }
    async with served(tmp_path, **digest) as (server, slack), server.client() as owner:
        until = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
        r = await owner.post(
            "/api/away", json={"person": "alice", "delegate": "bob", "until": until}
        )
        assert r.status_code == 200, r.text
        made = await file_request(owner, "2.0.0")

        def digest_to(user: str) -> Any:
            return lambda call: (
                call.args.get("channel") == dm(user) and "waits for you" in str(call.args["text"])
            )

        [bobs] = await slack.wait_for("chat.postMessage", digest_to(BOB), timeout=60)
        [carols] = await slack.wait_for("chat.postMessage", digest_to(CAROL), timeout=60)
        link = f"http://pizza.example/items/{made['item_id']}"
        assert link in bobs.args["text"] and "— for alice — waiting" in bobs.args["text"]
        # Carol decides it in her own right: her digest says for nobody.
        assert link in carols.args["text"] and "for alice" not in carols.args["text"]


async def test_the_away_person_gets_their_cards_again_after_until(tmp_path: Path) -> None:
    async with served(tmp_path) as (server, slack), server.client() as owner:
        soon = (datetime.now(UTC) + timedelta(seconds=4)).isoformat()
        done = await pizzabot(
            server, "away", "--person", "alice", "--until", soon, "--delegate", "bob"
        )
        assert done.returncode == 0, done.stderr
        assert "alice is away until" in done.stdout and "bob decides for them" in done.stdout

        during = await file_request(owner, "2.0.0")
        assert (await card_of(slack, during["item_id"])).args["channel"] == dm(BOB)

        async def over() -> bool:
            return not (await owner.get("/api/away")).json()["items"]

        await eventually(over, what="alice's away to end", timeout=30)
        listed = await pizzabot(server, "away", "--list")
        assert "Nobody is away." in listed.stdout, listed

        after = await file_request(owner, "2.0.1")
        card = await card_of(slack, after["item_id"])
        assert card.args["channel"] == dm(ALICE)
        assert "away" not in json.dumps(card.args["blocks"])

        # Bob is no longer her delegate: his click on her card is refused, hers counts.
        await click(server, card, BOB)
        await told(slack, BOB, "")
        assert (await request_state(owner, after["id"]))["status"] == "pending"
        await click(server, card, ALICE)

        async def approved() -> dict[str, Any] | None:
            state = await request_state(owner, after["id"])
            return state if state["status"] == "approved" else None

        state = await eventually(approved, what="alice's approval", timeout=30)
        assert state["decided_by"] == ALICE


async def test_away_back_ends_it_at_once(tmp_path: Path) -> None:
    async with served(tmp_path) as (server, _slack), server.client() as owner:
        bob_token = await token_for(owner, "bob")
        later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
        set_ = await pizzabot(
            server, "away", "--until", later, "--delegate", "alice", token=bob_token
        )
        assert set_.returncode == 0, set_.stderr
        assert "bob is away until" in set_.stdout
        back = await pizzabot(server, "away", "--back", token=bob_token)
        assert back.returncode == 0, back.stderr
        assert "bob is back" in back.stdout
        assert (await owner.get("/api/away")).json()["items"] == []
        again = await pizzabot(server, "away", "--back", token=bob_token)
        assert again.returncode != 0
        audit = (await owner.get("/api/audit")).json()["items"]
        assert [e["action"] for e in audit if e["action"].startswith("away_")][:2] == [
            "away_ended",
            "away_set",
        ]


async def test_one_human_never_counts_twice_through_delegation(tmp_path: Path) -> None:
    """deploy.big needs two people of alice and carol. Both are away with bob as their
    delegate: bob's approval for one counts, and his second, for the other, does not. Nor
    does bob's approval for alice count after alice approved herself."""
    async with served(tmp_path) as (server, slack), server.client() as owner:
        until = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        for person in ("alice", "carol"):
            r = await owner.post(
                "/api/away", json={"person": person, "delegate": "bob", "until": until}
            )
            assert r.status_code == 200, r.text
        made = await file_request(owner, "3.0.0", tool="deploy.big")
        card = await card_of(slack, made["item_id"])
        assert card.args["channel"] == dm(BOB)
        shown = json.dumps(card.args["blocks"])
        assert "For alice, who is away" in shown and "For carol, who is away" in shown

        await click(server, card, BOB)
        await slack.wait_for(
            "chat.update",
            lambda call: (
                call.args.get("ts") == card.answer["ts"]
                and "1 of 2 approved" in json.dumps(call.args)
            ),
        )
        await click(server, card, BOB)
        await told(slack, BOB, "bob approved this already")
        assert (await request_state(owner, made["id"]))["status"] == "pending"

        # Alice approves herself on another request; bob's approval for her then adds nothing.
        second = await file_request(owner, "3.0.1", tool="deploy.big")
        card2 = await card_of(slack, second["item_id"])
        await click(server, card2, ALICE)
        await slack.wait_for(
            "chat.update",
            lambda call: (
                call.args.get("ts") == card2.answer["ts"]
                and "1 of 2 approved" in json.dumps(call.args)
            ),
        )
        await click(server, card2, BOB)
        await told(slack, BOB, "alice approved this already")
        assert (await request_state(owner, second["id"]))["status"] == "pending"


async def test_the_web_page_sets_and_ends_an_away_and_shows_the_mark(tmp_path: Path) -> None:
    async with (
        served(tmp_path) as (server, slack),
        server.client() as owner,
        httpx.AsyncClient(base_url=server.url) as page,
    ):
        login = await page.get("/login", params={"token": TOKEN})
        assert login.status_code == 303, login.text
        form = (await page.get("/away")).text
        assert "Nobody is away." in form
        until = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
        r = await page.post(
            "/away",
            data={"csrf": csrf_of(form), "person": "alice", "delegate": "bob", "until": until},
        )
        assert r.status_code == 303 and "flash=away" in r.headers["location"], r.text
        shown = words((await page.get(r.headers["location"])).text)
        assert "alice is away until" in shown and "bob decides for them" in shown

        made = await file_request(owner, "5.0.0")
        assert (await card_of(slack, made["item_id"])).args["channel"] == dm(BOB)
        item_page = words((await page.get(f"/items/{made['item_id']}")).text)
        assert "For alice, who is away until" in item_page

        r = await page.post("/away", data={"csrf": csrf_of(form), "person": "alice", "back": "1"})
        assert r.status_code == 303 and "flash=back" in r.headers["location"], r.text
        assert "Nobody is away." in (await page.get("/away")).text
        assert (await owner.get("/api/away")).json()["items"] == []
