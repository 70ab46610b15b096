"""Telegram end to end in webhook mode: a real server process, the Bot API played by a local
recorder, and updates POSTed to `/telegram/webhook` with the secret token.

One server serves the module; every story uses its own run and finds its own messages by
the item's id. Each story ends with Telegram accepting everything the bot sent it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.peers.recorder import Call
from tests.peers.stack import Stack
from tests.peers.stories import EMAIL, send_then_summarise
from tests.peers.telegram_api import (
    TOKEN,
    TelegramPeer,
    button_data,
    callback_update,
    message_update,
    post_update,
)
from tests.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECRET = "telegram-webhook-secret-0123456789"
CHAT = -1001234567890
ANN, BOB, STRANGER = 424242, 515151, 666
PAIR_CHAT = -1009999


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def telegram() -> AsyncIterator[TelegramPeer]:
    async with TelegramPeer() as peer:
        yield peer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    telegram: TelegramPeer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    root: Path = tmp_path_factory.mktemp("telegram")
    env = {
        "PIZZABOT_TELEGRAM_BOT_TOKEN": TOKEN,
        "PIZZABOT_TELEGRAM_MODE": "webhook",
        "PIZZABOT_TELEGRAM_WEBHOOK_SECRET": SECRET,
        "PIZZABOT_TELEGRAM_API_URL": telegram.url,
        "PIZZABOT_PUBLIC_URL": "http://pizza.example",
    }
    skill = {"deliver": {"telegram": CHAT}, "approvers": {"telegram": [ANN]}}
    pair = {
        "name": "pair",
        "people": {"ann": {"telegram": ANN}, "bob": {"telegram": BOB}},
        "approvers": ["ann", "bob"],
        "deliver": {"telegram": PAIR_CHAT},
        "tools": {"crm.send_email": {"policy": "ask", "approvals": {"required": 2}}},
    }
    guarded = {
        "name": "guarded",
        "deliver": {"telegram": CHAT},
        "approvers": {"telegram": [ANN]},
        "tools": {"crm.send_email": {"policy": "ask", "step_up": "passkey"}},
    }
    async with Stack(
        root, script=send_then_summarise, skill=skill, extra_skills=[pair, guarded], env=env
    ) as st:
        yield st


@pytest.fixture(autouse=True)
def telegram_accepts_every_message(telegram: TelegramPeer) -> Iterator[None]:
    yield
    telegram.check()


def webhook(st: Stack) -> str:
    return f"{st.server.url}/telegram/webhook"


def mentions(item_id: str) -> Any:
    return lambda c: item_id in json.dumps(c.args.get("reply_markup") or {})


async def carded(
    st: Stack, telegram: TelegramPeer, text: str, skill: str = "test"
) -> tuple[dict[str, Any], Call]:
    run = await st.start_run(skill, text)
    item = await st.wait_item(run["id"])
    [card] = await telegram.wait_for("sendMessage", mentions(item["id"]))
    return item, card


async def send(st: Stack, update: dict[str, Any]) -> None:
    r = await post_update(webhook(st), update, secret=SECRET)
    assert r.status_code == 200, r.text


async def click(
    st: Stack, telegram: TelegramPeer, card: Call, label: str, user: int = ANN
) -> dict[str, Any]:
    update = callback_update(user=user, data=button_data(card, label), card=telegram.message(card))
    await send(st, update)
    return update


async def toast(telegram: TelegramPeer, update: dict[str, Any]) -> Call:
    query = update["callback_query"]["id"]
    [answer] = await telegram.wait_for(
        "answerCallbackQuery", lambda c: c.args.get("callback_query_id") == query
    )
    return answer


async def edited(telegram: TelegramPeer, card: Call, containing: str) -> Call:
    message_id = card.answer["message_id"]
    calls = await telegram.wait_for(
        "editMessageText",
        lambda c: c.args.get("message_id") == message_id and containing in c.args["text"],
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


async def prompt_for(telegram: TelegramPeer, item_id: str, verb: str, count: int = 1) -> Call:
    calls = await telegram.wait_for(
        "sendMessage",
        lambda c: f"ref: {verb} {item_id} " in c.args["text"],
        count=count,
    )
    return calls[-1]


async def test_approve_by_button_edits_the_card_and_threads_the_result(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    item, card = await carded(st, telegram, "send Ann the quote")
    assert card.args["chat_id"] == str(CHAT) and "reply_parameters" not in card.args
    assert "test: approval needed" in card.args["text"] and "ann@example.com" in card.args["text"]
    assert [b["text"] for b in card.args["reply_markup"]["inline_keyboard"][0]] == [
        "Approve",
        "Edit",
        "Reject",
    ]
    update = await click(st, telegram, card, "Approve")
    answer = await toast(telegram, update)
    assert answer.args["text"] == "Approved." and answer.args["show_alert"] is False
    decided = await edited(telegram, card, "Approved by 424242 via telegram")
    assert decided.args["reply_markup"] == {"inline_keyboard": []}
    await st.wait_run(item["run_id"], {"done"})
    [note] = await telegram.wait_for("sendMessage", lambda c: "Finished." in c.args["text"])
    assert note.args["reply_parameters"]["message_id"] == card.answer["message_id"]
    # Telegram sends an update again when it thinks it was lost: it is handled once.
    await send(st, update)
    await send(st, message_update(user=ANN, chat=CHAT, text="/pizza help"))
    await telegram.wait_for("sendMessage", lambda c: "starts a run" in c.args["text"])
    query = update["callback_query"]["id"]
    answers = telegram.calls_to("answerCallbackQuery")
    assert [c.args["callback_query_id"] for c in answers].count(query) == 1


async def test_edit_with_a_schema_error_then_a_valid_edit(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    item, card = await carded(st, telegram, "send Ann the quote, twice")
    await click(st, telegram, card, "Edit")
    prompt = await prompt_for(telegram, item["id"], "edit")
    assert prompt.args["reply_markup"]["force_reply"] is True
    assert "copies: 1" in prompt.args["text"]
    wrong = message_update(
        user=ANN, chat=CHAT, text="copies: many", reply_to=telegram.message(prompt)
    )
    await send(st, wrong)
    again = await prompt_for(telegram, item["id"], "edit", count=2)
    assert "Not applied" in again.args["text"] and "copies" in again.args["text"]
    assert (await item_now(st, item["id"]))["status"] == "pending"
    right = message_update(
        user=ANN, chat=CHAT, text="copies: 2\nsubject: Quote (2)", reply_to=telegram.message(again)
    )
    await send(st, right)
    done = await becomes(st, item["id"], "edited")
    assert done["final_args"] == {**EMAIL, "copies": 2, "subject": "Quote (2)"}
    await edited(telegram, card, "Edited by 424242 via telegram")
    await st.wait_run(item["run_id"], {"done"})


async def test_reject_with_a_reason(stack: Stack, telegram: TelegramPeer) -> None:
    st = stack
    item, card = await carded(st, telegram, "send Ann the quote, or not")
    await click(st, telegram, card, "Reject")
    prompt = await prompt_for(telegram, item["id"], "reject")
    reply = message_update(
        user=ANN, chat=CHAT, text="wrong customer", reply_to=telegram.message(prompt)
    )
    await send(st, reply)
    done = await becomes(st, item["id"], "rejected")
    assert done["reason"] == "wrong customer"
    await edited(telegram, card, "Rejected by 424242 via telegram at")
    run = await st.wait_run(item["run_id"], {"done"})
    told = [e["data"] for e in run["events"] if e["kind"] == "tool_result"]
    assert any("wrong customer" in str(t) for t in told)


async def test_a_non_approvers_click_is_refused_and_audited(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    item, card = await carded(st, telegram, "send Ann the quote, says a stranger")
    for label in ("Approve", "Edit"):
        update = await click(st, telegram, card, label, user=STRANGER)
        answer = await toast(telegram, update)
        assert answer.args["show_alert"] is True
        assert "approvers.telegram" in answer.args["text"]
    assert (await item_now(st, item["id"]))["status"] == "pending"
    assert not [
        c for c in telegram.calls_to("sendMessage") if f"ref: edit {item['id']}" in c.args["text"]
    ]
    async with st.client() as c:
        entries = (await c.get("/api/audit")).json()["items"]
    refused = [
        e for e in entries if e["action"] == "decision_refused" and e["item_id"] == item["id"]
    ]
    assert {(e["actor"], e["channel"]) for e in refused} == {(str(STRANGER), "telegram")}
    assert len(refused) == 2
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_a_card_that_needs_a_passkey_is_approved_on_the_page_not_by_a_click(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    item, card = await carded(st, telegram, "send Ann the quote, with a passkey", "guarded")
    [approve, edit, reject] = card.args["reply_markup"]["inline_keyboard"][0]
    assert approve == {
        "text": "Approve with passkey",
        "url": f"http://pizza.example/items/{item['id']}",
    }
    assert (edit["text"], reject["text"]) == ("Edit", "Reject")
    # The approve click sent anyway (it has no button to come from): refused, and told why.
    forged = "a:" + edit["callback_data"].partition(":")[2]
    update = callback_update(user=ANN, data=forged, card=telegram.message(card))
    await send(st, update)
    answer = await toast(telegram, update)
    assert answer.args["show_alert"] is True and "passkey" in answer.args["text"]
    assert (await item_now(st, item["id"]))["status"] == "pending"
    # Reject never needs a passkey.
    await click(st, telegram, card, "Reject")
    await prompt_for(telegram, item["id"], "reject")
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_an_update_without_the_secret_is_refused_before_it_is_read(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    item, card = await carded(st, telegram, "send Ann the quote, forged")
    forged = callback_update(
        user=ANN, data=button_data(card, "Approve"), card=telegram.message(card)
    )
    for secret in (None, "not-the-secret", SECRET + "x"):
        r = await post_update(webhook(st), forged, secret=secret)
        assert r.status_code == 401 and "secret token" in r.json()["detail"]
    # Not even read: a body that is no JSON at all gets the same answer.
    r = await post_update(webhook(st), b"{not json", secret=None)
    assert r.status_code == 401
    r = await post_update(webhook(st), b"{not json", secret=SECRET)
    assert r.status_code == 400
    assert (await item_now(st, item["id"]))["status"] == "pending"
    await st.decide(item["id"], "reject", reason="cleaning up")


async def test_a_decision_on_another_channel_edits_the_card(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    item, card = await carded(st, telegram, "send Ann the quote, from the API")
    r = await st.decide(item["id"], "approve")
    assert r.status_code == 200, r.text
    update = await edited(telegram, card, "Approved by owner via api")
    assert update.args["reply_markup"] == {"inline_keyboard": []}
    # A late click on the card is told who decided first.
    late = callback_update(user=ANN, data=button_data(card, "Approve"), card=telegram.message(card))
    await send(st, late)
    answer = await toast(telegram, late)
    assert (
        answer.args["show_alert"] is True
        and "Already approved by owner via api" in answer.args["text"]
    )


async def test_a_click_on_a_card_from_before_an_edit_is_refused_as_changed(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    item, card = await carded(st, telegram, "mail Ann, or rather Bea", skill="pair")
    bea = {**EMAIL, "to": "bea@example.com"}
    r = await st.decide(item["id"], "edit", args=bea)  # the owner's edit: a new count
    assert r.status_code == 200, r.text
    shown = await edited(telegram, card, "bea@example.com")
    assert "1 of 2 approved: owner via the API" in shown.args["text"]
    # Ann's click on the card as she saw it before the edit decides nothing.
    old = callback_update(user=ANN, data=button_data(card, "Approve"), card=telegram.message(card))
    await send(st, old)
    answer = await toast(telegram, old)
    assert answer.args["show_alert"] is True and "card changed" in answer.args["text"]
    assert (await item_now(st, item["id"]))["risk"]["approved"] == ["owner via the API"]
    # From the card as it is now, her approval makes the second person.
    now = callback_update(user=ANN, data=button_data(shown, "Approve"), card=telegram.message(card))
    await send(st, now)
    done = await becomes(st, item["id"], "edited")
    assert done["final_args"] == bea
    assert done["risk"]["approved"] == ["owner via the API", "ann via Telegram"]


async def test_start_with_pizza_and_follow_up_by_replying_to_the_result(
    stack: Stack, telegram: TelegramPeer
) -> None:
    st = stack
    start = message_update(user=ANN, chat=CHAT, text="/pizza@pizza_bot test please mail Ann")
    await send(st, start)
    [answer] = await telegram.wait_for("sendMessage", lambda c: "Started run" in c.args["text"])
    assert answer.args["reply_parameters"]["message_id"] == start["message"]["message_id"]
    async with st.client() as c:
        runs = (await c.get("/api/runs")).json()["items"]
    run = next(r for r in runs if r["input"] == "please mail Ann")
    assert run["trigger"] == "telegram"
    item = await st.wait_item(run["id"])
    [card] = await telegram.wait_for("sendMessage", mentions(item["id"]))
    await click(st, telegram, card, "Approve")
    await st.wait_run(run["id"], {"done"})
    [note] = await telegram.wait_for(
        "sendMessage",
        lambda c: (
            "Finished." in c.args["text"]
            and c.args.get("reply_parameters", {}).get("message_id") == card.answer["message_id"]
        ),
    )
    follow = message_update(
        user=ANN, chat=CHAT, text="also copy Bob", reply_to=telegram.message(note)
    )
    await send(st, follow)

    async def followed() -> bool:
        got = await st.get_run(run["id"])
        return any(
            e["kind"] == "user_message" and "also copy Bob" in json.dumps(e["data"])
            for e in got["events"]
        )

    await eventually(followed, what="the follow-up in the run")
    # A stranger can neither start a run nor steer this one.
    await send(st, message_update(user=STRANGER, chat=CHAT, text="/pizza test hi"))
    await telegram.wait_for(
        "sendMessage", lambda c: "can start runs from Telegram" in c.args["text"]
    )
    steer = message_update(
        user=STRANGER, chat=CHAT, text="send it to me", reply_to=telegram.message(note)
    )
    await send(st, steer)
    await telegram.wait_for("sendMessage", lambda c: "steer its runs" in c.args["text"])


async def test_a_rate_limit_only_delays_the_card(stack: Stack, telegram: TelegramPeer) -> None:
    telegram.fail_next(1, status=429, retry_after=1, methods={"sendMessage"})
    item, card = await carded(stack, telegram, "send Ann the quote, when Telegram lets us")
    limited = [c for c in telegram.calls if c.method == "sendMessage" and c.status == 429]
    assert len(limited) == 1 and limited[0].at < card.at
    assert card.at - limited[0].at >= 0.9  # Telegram's retry_after, honoured
    await stack.decide(item["id"], "reject", reason="cleaning up")
