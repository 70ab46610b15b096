"""Escalation and away on Teams and Discord, end to end: a real server process with both
platforms played by their local peers (the Bot Framework connector with its token endpoint,
Discord's HTTP API).

A card that nobody decides widens after a few seconds to dana, who is on Teams, and erin, who
is on Discord: the bot opens dana's personal chat and erin's direct messages and sends each
of them the card, and dana approves it from her chat. Alice reads her cards in her Teams
chat; while she is away, they go to her delegate bob's Discord direct messages instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio

from tests.peers.discord_api import APPLICATION_ID, TOKEN, DiscordPeer, Signer
from tests.peers.stack import Stack
from tests.peers.stories import send_then_summarise
from tests.peers.teams_api import (
    APP_ID,
    APP_SECRET,
    TeamsPeer,
    action,
    card_of,
    find_action,
    post_activity,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPS = "19:ops-team@thread.tacv2"
DANA = "0d0d0d0d-1111-4222-8333-444444444444"  # her Entra object id
ALICE = "0a0a0a0a-1111-4222-8333-444444444444"
ERIN, BOB = "1700000000000000001", "1700000000000000002"  # Discord user ids
PEOPLE = {"alice": {"teams": ALICE}, "dana": {"teams": DANA}, "erin": {"discord": ERIN}}
PEOPLE |= {"bob": {"discord": BOB}}
WIDEN = {
    "people": PEOPLE,
    "approvers": ["alice"],
    "deliver": {"teams": OPS},
    "tools": {
        "crm.send_email": {"policy": "ask", "escalate": [{"after": "3s", "to": ["dana", "erin"]}]}
    },
}
AWAY = {**WIDEN, "name": "away", "deliver": {"teams": f"user:{ALICE}"}, "tools": {}}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def peers() -> AsyncIterator[tuple[TeamsPeer, DiscordPeer]]:
    async with TeamsPeer() as teams, DiscordPeer() as discord:
        yield teams, discord


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    peers: tuple[TeamsPeer, DiscordPeer], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    teams, discord = peers
    env = {
        "PIZZABOT_TEAMS_APP_ID": APP_ID,
        "PIZZABOT_TEAMS_APP_PASSWORD": APP_SECRET,
        "PIZZABOT_TEAMS_OPENID_URL": teams.openid_url,
        "PIZZABOT_TEAMS_TOKEN_URL": teams.token_url,
        "PIZZABOT_TEAMS_SERVICE_URL": teams.service_url,
        "PIZZABOT_DISCORD_APPLICATION_ID": APPLICATION_ID,
        "PIZZABOT_DISCORD_PUBLIC_KEY": Signer().public_hex,
        "PIZZABOT_DISCORD_BOT_TOKEN": TOKEN,
        "PIZZABOT_DISCORD_API_URL": discord.url,
        "PIZZABOT_PUBLIC_URL": "http://pizza.example",
        "PIZZABOT_TIMERS_INTERVAL": "0.5",
    }
    root = tmp_path_factory.mktemp("widen")
    async with Stack(
        root, script=send_then_summarise, skill=WIDEN, extra_skills=[AWAY], env=env
    ) as st:
        yield st


async def invoke(st: Stack, teams: TeamsPeer, chat: str, act: dict[str, Any]) -> Any:
    """Dana's `Action.Execute` of `act` in her personal chat, signed as Teams signs it; the
    bot's answer."""
    click = action(
        service_url=teams.service_url,
        user=DANA,
        conversation=chat,
        verb=act["verb"],
        data=act["data"],
    )
    token = teams.signer.token(teams.service_url)
    r = await post_activity(f"{st.server.url}/teams/messages", click, token=token)
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_widening_reaches_a_teams_person_and_a_discord_person(
    stack: Stack, peers: tuple[TeamsPeer, DiscordPeer]
) -> None:
    st, (teams, discord) = stack, peers
    run = await st.start_run("test", "mail Ann")
    item = await st.wait_item(run["id"])
    await teams.wait_for("send", lambda c: c.args["_conversation"] == OPS)

    # Dana's personal chat is opened, and the card sent there.
    [opened] = await teams.wait_for(
        "create_conversation", lambda c: c.args["members"] == [{"id": DANA}], timeout=30
    )
    assert opened.args["bot"] == {"id": APP_ID} and opened.args["isGroup"] is False
    chat = opened.answer["id"]
    [card] = await teams.wait_for(
        "send", lambda c: c.args["_conversation"] == chat and item["id"] in json.dumps(c.args)
    )
    assert "sent to dana, erin" in json.dumps(card_of(card))

    # Erin's direct messages with the bot are opened, and the card sent there.
    [dm] = await discord.wait_for("open_dm", lambda c: c.args == {"recipient_id": ERIN})
    channel = dm.answer["id"]
    await discord.wait_for(
        "create_message",
        lambda c: c.answer["channel_id"] == channel and item["id"] in json.dumps(c.args),
    )

    # Dana approves it from her chat: the widening let her decide.
    shown = card_of(card)
    mine = await invoke(st, teams, chat, shown["refresh"]["action"])  # Teams asks as Dana sees it
    answer = await invoke(st, teams, chat, find_action(mine["value"], "Approve"))
    assert f"Approved by {DANA} via teams" in json.dumps(answer["value"])
    await st.wait_run(run["id"], {"done"})
    async with st.client() as c:
        decided = (await c.get(f"/api/items/{item['id']}")).json()
    assert (decided["status"], decided["decided_via"]) == ("approved", "teams")
    async with st.client() as c:
        audit = (await c.get("/api/audit")).json()["items"]
    [step] = [e for e in audit if e["action"] == "approval_escalated"]
    assert f"teams:user:{DANA}" in step["detail"]["targets"]
    assert f"discord:user:{ERIN}" in step["detail"]["targets"]
    teams.check()
    discord.check()


async def test_an_away_persons_teams_cards_go_to_their_delegate_on_discord(
    stack: Stack, peers: tuple[TeamsPeer, DiscordPeer]
) -> None:
    st, (teams, discord) = stack, peers
    until = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    async with st.client() as c:
        r = await c.post("/api/away", json={"person": "alice", "delegate": "bob", "until": until})
        assert r.status_code == 200, r.text
    run = await st.start_run("away", "mail Ann")
    item = await st.wait_item(run["id"])

    [dm] = await discord.wait_for("open_dm", lambda c: c.args == {"recipient_id": BOB})
    [card] = await discord.wait_for(
        "create_message",
        lambda c: c.answer["channel_id"] == dm.answer["id"] and item["id"] in json.dumps(c.args),
    )
    assert "For alice, who is away until" in json.dumps(card.args)
    opened = [c.args["members"] for c in teams.calls_to("create_conversation")]
    assert [{"id": ALICE}] not in opened
    async with st.client() as c:
        assert (await c.delete("/api/away", params={"person": "alice"})).status_code == 200
    discord.check()
