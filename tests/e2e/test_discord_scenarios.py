"""Discord end to end: a real server process, Discord's HTTP API played by a local recorder,
and interactions POSTed to `/discord/interactions` signed with a test Ed25519 key pair.

One server serves the module; every story uses its own run and finds its own messages by the
item's id. Each story ends with Discord accepting everything the bot sent it, and every
interaction's answer is checked against Discord's limits as it comes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.peers.discord_api import (
    APPLICATION_ID,
    TOKEN,
    DiscordPeer,
    Signer,
    button_id,
    command,
    component,
    menu_value,
    modal_submit,
    pick,
    post_interaction,
    response_problems,
)
from tests.peers.recorder import Call
from tests.peers.stack import Stack
from tests.peers.stories import EMAIL, send_then_summarise
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHANNEL, PAIR_CHANNEL = "1500000000000000001", "1500000000000000002"
ANN, BOB, STRANGER = "1600000000000000001", "1600000000000000002", "1600000000000000666"
SIGNER = Signer()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def discord() -> AsyncIterator[DiscordPeer]:
    async with DiscordPeer() as peer:
        yield peer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    discord: DiscordPeer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    root: Path = tmp_path_factory.mktemp("discord")
    env = {
        "PIZZABOT_DISCORD_APPLICATION_ID": APPLICATION_ID,
        "PIZZABOT_DISCORD_PUBLIC_KEY": SIGNER.public_hex,
        "PIZZABOT_DISCORD_BOT_TOKEN": TOKEN,
        "PIZZABOT_DISCORD_API_URL": discord.url,
        "PIZZABOT_PUBLIC_URL": "http://pizza.example",
    }
    skill = {"deliver": {"discord": CHANNEL}, "approvers": {"discord": [ANN]}}
    pair = {
        "name": "pair",
        "people": {"ann": {"discord": ANN}, "bob": {"discord": BOB}},
        "approvers": ["ann", "bob"],
        "deliver": {"discord": PAIR_CHANNEL},
        "tools": {"crm.send_email": {"policy": "ask", "approvals": {"required": 2}}},
    }
    guarded = {
        "name": "guarded",
        "deliver": {"discord": CHANNEL},
        "approvers": {"discord": [ANN]},
        "tools": {"crm.send_email": {"policy": "ask", "step_up": "passkey"}},
    }
    async with Stack(
        root, script=send_then_summarise, skill=skill, extra_skills=[pair, guarded], env=env
    ) as st:
        yield st


@pytest.fixture(autouse=True)
def discord_accepts_every_payload(discord: DiscordPeer) -> Iterator[None]:
    yield
    discord.check()


def endpoint(st: Stack) -> str:
    return f"{st.server.url}/discord/interactions"


def mentions(item_id: str) -> Any:
    return lambda c: item_id in json.dumps(c.args.get("components") or [])


async def carded(
    st: Stack, discord: DiscordPeer, text: str, skill: str = "test"
) -> tuple[dict[str, Any], Call]:
    run = await st.start_run(skill, text)
    item = await st.wait_item(run["id"])
    [card] = await discord.wait_for("create_message", mentions(item["id"]))
    return item, card


async def send(st: Stack, interaction: dict[str, Any]) -> dict[str, Any]:
    """Send a signed interaction; its answer, checked against Discord's limits."""
    r = await post_interaction(endpoint(st), interaction, signer=SIGNER)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    assert response_problems(answer) == [], answer
    return answer


async def click(
    st: Stack, message: dict[str, Any], label: str, user: str = ANN
) -> tuple[dict[str, Any], dict[str, Any]]:
    interaction = component(user=user, custom_id=button_id(message, label), message=message)
    return interaction, await send(st, interaction)


async def edited(discord: DiscordPeer, card: Call, containing: str) -> Call:
    message_id = card.answer["id"]
    calls = await discord.wait_for(
        "edit_message",
        lambda c: c.answer.get("id") == message_id and containing in card_text(c),
    )
    return calls[-1]


async def item_now(st: Stack, item_id: str) -> dict[str, Any]:
    async with st.client() as c:
        r = await c.get(f"/api/items/{item_id}")
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


async def becomes(st: Stack, item_id: str, status: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        item = await item_now(st, item_id)
        return item if item["status"] == status else None

    return await eventually(check, what=f"item {item_id} to be {status}")


def card_text(call: Call) -> str:
    """A message's texts as Discord shows them (its markdown escapes read)."""
    return shown(json.dumps(call.args, ensure_ascii=False))


def shown(text: str) -> str:
    return re.sub(r"\\\\(.)", r"\1", text)


async def test_the_command_is_registered_and_a_ping_is_answered(
    stack: Stack, discord: DiscordPeer
) -> None:
    [registered] = await discord.wait_for("commands")
    assert [c["name"] for c in registered.args["list"]] == ["pizza"]
    assert await send(stack, {"id": "1", "type": 1, "application_id": APPLICATION_ID}) == {
        "type": 1
    }


async def test_approve_by_button_updates_the_card_and_replies_with_the_result(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    item, card = await carded(st, discord, "send Ann the quote")
    assert card.auth == f"Bot {TOKEN}" and "message_reference" not in card.args
    assert "test: approval needed" in card_text(card) and "ann@example.com" in card_text(card)
    labels = [b["label"] for b in card.args["components"][0]["components"]]
    assert labels == ["Approve", "Edit", "Reject"]
    _, answer = await click(st, card.answer, "Approve")
    assert answer == {"type": 6}  # deferred: the outbox updates the card
    decided = await edited(discord, card, "Approved by " + ANN + " via discord")
    assert decided.args["components"] == []
    await st.wait_run(item["run_id"], {"done"})
    [note] = await discord.wait_for("create_message", lambda c: "Finished." in card_text(c))
    assert note.args["message_reference"]["message_id"] == card.answer["id"]
    assert [b["label"] for b in note.args["components"][0]["components"]] == ["Reply to the run"]


async def test_edit_with_a_schema_error_then_a_valid_edit(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    item, card = await carded(st, discord, "send Ann the quote, twice")
    # Seven arguments: more than a modal holds. A menu picks the ones to change.
    _, answer = await click(st, card.answer, "Edit")
    assert answer["type"] == 4 and answer["data"]["flags"] == 64
    menu = answer["data"]
    copies = menu_value(menu, "Copies")
    opened = await send(st, pick(user=ANN, menu_message=menu, values=[copies]))
    assert opened["type"] == 9
    modal = opened["data"]
    [row] = modal["components"]
    assert row["components"][0]["label"] == "Copies" and row["components"][0]["value"] == "1"
    field = row["components"][0]["custom_id"]
    wrong = await send(st, modal_submit(user=ANN, modal=modal, values={field: "many"}))
    assert wrong["type"] == 4 and wrong["data"]["flags"] == 64
    assert "copies" in wrong["data"]["content"] and "still waits" in shown(wrong["data"]["content"])
    assert (await item_now(st, item["id"]))["status"] == "pending"
    # "Edit again" opens the menu anew.
    again_id = wrong["data"]["components"][0]["components"][0]["custom_id"]
    again = await send(st, component(user=ANN, custom_id=again_id, message=card.answer))
    assert again["type"] == 4
    chosen = [menu_value(again["data"], "Copies"), menu_value(again["data"], "Subject")]
    reopened = await send(st, pick(user=ANN, menu_message=again["data"], values=chosen))
    inputs = {
        r["components"][0]["label"]: r["components"][0]["custom_id"]
        for r in reopened["data"]["components"]
    }
    right = modal_submit(
        user=ANN,
        modal=reopened["data"],
        values={inputs["Copies"]: "2", inputs["Subject"]: "Quote (2)"},
    )
    answer = await send(st, right)
    assert answer == {"type": 5, "data": {"flags": 64}}
    done = await becomes(st, item["id"], "edited")
    assert done["final_args"] == {**EMAIL, "copies": 2, "subject": "Quote (2)"}
    [said] = await discord.wait_for("edit_original", lambda c: "Edited" in c.args["content"])
    assert said.auth is None
    await edited(discord, card, "Edited by " + ANN + " via discord")
    await st.wait_run(item["run_id"], {"done"})


async def test_reject_with_a_reason(stack: Stack, discord: DiscordPeer) -> None:
    st = stack
    item, card = await carded(st, discord, "send Ann the quote, or not")
    _, answer = await click(st, card.answer, "Reject")
    assert answer["type"] == 9
    modal = answer["data"]
    await send(st, modal_submit(user=ANN, modal=modal, values={"reason": "wrong customer"}))
    done = await becomes(st, item["id"], "rejected")
    assert done["reason"] == "wrong customer"
    await edited(discord, card, "wrong customer")
    run = await st.wait_run(item["run_id"], {"done"})
    told = [e["data"] for e in run["events"] if e["kind"] == "tool_result"]
    assert any("wrong customer" in str(t) for t in told)


async def test_a_non_approvers_click_is_refused_and_audited(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    item, card = await carded(st, discord, "send Ann the quote, says a stranger")
    _, edit = await click(st, card.answer, "Edit", user=STRANGER)
    assert edit["type"] == 4 and "approvers.discord" in edit["data"]["content"]
    _, approve = await click(st, card.answer, "Approve", user=STRANGER)
    assert approve == {"type": 6}
    [told] = await discord.wait_for(
        "followup", lambda c: "approvers.discord" in c.args.get("content", "")
    )
    assert told.args["flags"] == 64 and told.auth is None
    assert (await item_now(st, item["id"]))["status"] == "pending"
    async with st.client() as c:
        entries = (await c.get("/api/audit")).json()["items"]
    refused = [
        e for e in entries if e["action"] == "decision_refused" and e["item_id"] == item["id"]
    ]
    assert [(e["actor"], e["channel"]) for e in refused] == [(STRANGER, "discord")] * 2
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_a_card_that_needs_a_passkey_is_approved_on_the_page_not_by_a_click(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    item, card = await carded(st, discord, "send Ann the quote, with a passkey", skill="guarded")
    [approve, edit, reject] = card.args["components"][0]["components"]
    assert approve == {
        "type": 2,
        "style": 5,
        "label": "Approve with passkey",
        "url": f"http://pizza.example/items/{item['id']}",
    }
    assert (edit["label"], reject["label"]) == ("Edit", "Reject")
    # The approve click sent anyway (it has no button to come from): refused, and told why.
    forged = edit["custom_id"].replace(":edit:", ":approve:", 1)
    answer = await send(st, component(user=ANN, custom_id=forged, message=card.answer))
    assert answer == {"type": 6}
    [told] = await discord.wait_for(
        "followup",
        lambda c: item["id"] in c.args.get("content", "") and "passkey" in c.args["content"],
    )
    assert told.args["flags"] == 64
    assert (await item_now(st, item["id"]))["status"] == "pending"
    # Reject never needs a passkey.
    _, opened = await click(st, card.answer, "Reject")
    assert opened["type"] == 9  # the modal that asks why
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_a_forged_or_unsigned_interaction_is_refused_before_it_is_read(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    item, card = await carded(st, discord, "send Ann the quote, forged")
    click_ = component(user=ANN, custom_id=button_id(card.answer, "Approve"), message=card.answer)
    body = json.dumps(click_).encode()
    forger = Signer()
    for signer, stamp in ((None, None), (forger, None), (SIGNER, int(time.time()) - 3600)):
        r = await post_interaction(endpoint(st), body, signer=signer, timestamp=stamp)
        assert r.status_code == 401 and r.json() == {"detail": "invalid request signature"}
    # A signature over other bytes does not carry over to these.
    headers = SIGNER.headers(body)
    tampered = body.replace(ANN.encode(), BOB.encode())
    async with httpx.AsyncClient() as c:
        r = await c.post(endpoint(st), content=tampered, headers=headers)
    assert r.status_code == 401
    # Not even parsed: a body that is no JSON gets the same answer unsigned, and 400 signed.
    assert (await post_interaction(endpoint(st), b"{no", signer=None)).status_code == 401
    assert (await post_interaction(endpoint(st), b"{no", signer=SIGNER)).status_code == 400
    assert (await item_now(st, item["id"]))["status"] == "pending"
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_a_decision_on_another_channel_updates_the_card(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    item, card = await carded(st, discord, "send Ann the quote, from the API")
    r = await st.decide(item["id"], "approve")
    assert r.status_code == 200, r.text
    update = await edited(discord, card, "Approved by owner via api")
    assert update.args["components"] == []
    # A late click on the card as it was is told who decided first.
    _, answer = await click(st, card.answer, "Edit")
    assert answer["type"] == 4 and "Already approved by owner via api" in answer["data"]["content"]


async def test_a_click_on_a_card_from_before_an_edit_is_refused_as_changed(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    item, card = await carded(st, discord, "mail Ann, or rather Bea", skill="pair")
    bea = {**EMAIL, "to": "bea@example.com"}
    assert (await st.decide(item["id"], "edit", args=bea)).status_code == 200
    redrawn = await edited(discord, card, "bea@example.com")
    assert "1 of 2 approved: owner via the API" in card_text(redrawn)
    # Ann's click on the card as she saw it before the edit decides nothing.
    await click(st, card.answer, "Approve")
    [told] = await discord.wait_for(
        "followup", lambda c: "card changed" in c.args.get("content", "")
    )
    assert told.args["flags"] == 64
    _, edit = await click(st, card.answer, "Edit")
    assert edit["type"] == 4 and "card changed" in edit["data"]["content"]
    assert (await item_now(st, item["id"]))["risk"]["approved"] == ["owner via the API"]
    # From the card as it is now, her approval makes the second person.
    now = {**card.answer, **redrawn.args}
    await click(st, now, "Approve")
    done = await becomes(st, item["id"], "edited")
    assert done["final_args"] == bea
    assert done["risk"]["approved"] == ["owner via the API", "ann via Discord"]


async def test_start_with_pizza_and_follow_up_from_the_result(
    stack: Stack, discord: DiscordPeer
) -> None:
    st = stack
    started = await send(st, command(user=ANN, text="test please mail Ann"))
    assert started == {"type": 5, "data": {"flags": 64}}
    [said] = await discord.wait_for("edit_original", lambda c: "Started run" in c.args["content"])
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    run = next(r for r in runs if r["input"] == "please mail Ann")
    assert run["trigger"] == "discord" and run["id"] in said.args["content"]
    item = await st.wait_item(run["id"])
    [card] = await discord.wait_for("create_message", mentions(item["id"]))
    await click(st, card.answer, "Approve")
    await st.wait_run(run["id"], {"done"})
    [note] = await discord.wait_for(
        "create_message",
        lambda c: (
            "Finished." in card_text(c)
            and c.args.get("message_reference", {}).get("message_id") == card.answer["id"]
        ),
    )
    _, reply = await click(st, note.answer, "Reply to the run")
    assert reply["type"] == 9
    await send(st, modal_submit(user=ANN, modal=reply["data"], values={"text": "also copy Bob"}))

    async def followed() -> bool:
        got = await st.get_run(run["id"])
        return any(
            e["kind"] == "user_message" and "also copy Bob" in json.dumps(e["data"])
            for e in got["events"]
        )

    await eventually(followed, what="the follow-up in the run")
    # A stranger can neither start a run nor steer this one.
    await send(st, command(user=STRANGER, text="test hi"))
    await discord.wait_for(
        "edit_original", lambda c: "can start runs from Discord" in c.args["content"]
    )
    _, steer = await click(st, note.answer, "Reply to the run", user=STRANGER)
    await send(st, modal_submit(user=STRANGER, modal=steer["data"], values={"text": "to me"}))
    await discord.wait_for("edit_original", lambda c: "steer its runs" in c.args["content"])


async def test_a_rate_limit_only_delays_the_card(stack: Stack, discord: DiscordPeer) -> None:
    discord.fail_next(1, status=429, retry_after=1, methods={"create_message"})
    item, card = await carded(stack, discord, "send Ann the quote, when Discord lets us")
    limited = [c for c in discord.calls if c.method == "create_message" and c.status == 429]
    assert len(limited) == 1 and limited[0].at < card.at
    assert card.at - limited[0].at >= 0.9  # Discord's retry_after, honoured
    await stack.decide(item["id"], "reject", reason="cleaning up")
