"""Telegram's cards and prompts stay within Telegram's limits whatever the tool looks like
(the adversarial schemas of the Slack modals, every text at its longest), a prompt sent back
untouched gives back the proposal, and long polling hands each update on once, in order."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from pizzabot.agent.argforms import form_fields
from pizzabot.agent.card_digest import card_digest
from pizzabot.channels.chat.forms import edit_fields, edited_args, parse_lines
from pizzabot.channels.telegram import Poller, TelegramApi
from pizzabot.channels.telegram.render import (
    card_message,
    edit_prompt,
    public_url,
    read_callback,
    read_prompt,
    reject_prompt,
    visible_length,
)
from tests.peers.chat_cards import BASE_URL, WIDE_SCHEMA, action, cards, huge_item
from tests.peers.telegram_api import TOKEN, TelegramPeer, html_text, message_problems, person
from tests.scenarios.test_slack_modals import SCHEMAS

ANN = person(424242)


class Stopped(Exception):
    """Ends a poller's loop in a test."""


def sent(text: str, markup: dict[str, Any] | None) -> list[str]:
    return message_problems(
        "sendMessage", {"text": text, "parse_mode": "HTML", "reply_markup": markup}
    )


def test_every_card_and_prompt_is_one_telegram_accepts() -> None:
    for what, item in cards():
        msg = card_message(item, base_url=BASE_URL)
        assert sent(msg.text, msg.markup) == [], what
        assert visible_length(msg.text) <= 4096, what
        for prompt in (
            edit_prompt(item, edit_fields(item), user=ANN, base_url=BASE_URL),
            edit_prompt(
                item, edit_fields(item), user=ANN, base_url=BASE_URL, errors={"x": "y" * 5000}
            ),
            reject_prompt(item, user=ANN),
        ):
            assert sent(prompt.text, prompt.markup) == [], what


def test_a_pending_card_has_its_buttons_with_the_digest_and_a_decided_one_none() -> None:
    for what, item in cards():
        msg = card_message(item, base_url=BASE_URL)
        if item.decided or item.box.value == "unread":
            assert msg.markup is None, what
            continue
        assert msg.markup is not None, what
        for button in msg.markup["inline_keyboard"][0]:
            if item.risk.step_up and button["text"] == "Approve with passkey":
                # Its Approve is a link to the card's page: no click reaches the bot.
                assert button == {"text": button["text"], "url": f"{BASE_URL}/items/{item.id}"}
                continue
            _verb, item_id, seen = read_callback(button["callback_data"]) or ("", "", None)
            assert (item_id, seen) == (item.id, card_digest(item)), what


def test_on_a_loopback_address_a_passkey_card_keeps_a_button_the_bot_refuses() -> None:
    # Telegram takes no link to localhost or a bare IP address: the Approve stays a callback
    # button, whose click the inbox refuses with the way to the page.
    item = replace(huge_item(), risk=replace(huge_item().risk, step_up="passkey"))
    for base in ("http://127.0.0.1:8787", "http://localhost:8787"):
        msg = card_message(item, base_url=base)
        assert msg.markup is not None and sent(msg.text, msg.markup) == []
        first = msg.markup["inline_keyboard"][0][0]
        assert first["text"] == "Approve with passkey" and "url" not in first
        assert read_callback(first["callback_data"]) == ("approve", item.id, card_digest(item))
    assert public_url("https://pizza.example.com/items/1")
    assert not public_url("http://[::1]:8787/items/1") and not public_url("ftp://pizza.example")


def test_an_untouched_prompt_sent_back_gives_back_the_proposal() -> None:
    for what, (schema, args) in SCHEMAS.items():
        item = action(schema, args)
        prompt = edit_prompt(item, edit_fields(item), user=ANN, base_url=BASE_URL)
        shown = html_text(prompt.text)
        form = shown.split("\n", 1)[1].split("\nThe whole form", 1)[0]
        values, stray = parse_lines(form, edit_fields(item))
        assert stray == [], what
        if "huge" in values:
            # A model's 1e999 is inf: no number, whether sent back or left as proposed; the
            # same error as everywhere, until the person names a number.
            assert edited_args(item, values, whole=False)[1] == {"huge": "must be a number"}
            del values["huge"]
            left = edited_args(item, values, whole=False)[1]
            assert left == {"huge": "is out of range: must be a finite number"}
            values["huge"] = "5"
            args = {**args, "huge": 5}
        got, errors = edited_args(item, values, whole=False)
        assert errors == {}, what
        assert got == args, what
        ref = read_prompt(shown)
        assert ref is not None and (ref.verb, ref.item_id) == ("edit", item.id), what


def test_a_form_too_long_for_a_message_links_the_web_page() -> None:
    args = {name: "v" * 200 for name in WIDE_SCHEMA["properties"]}
    item = action(WIDE_SCHEMA, args)
    prompt = edit_prompt(item, form_fields(WIDE_SCHEMA, args), user=ANN, base_url=BASE_URL)
    assert prompt.markup is None and "too long for a message" in prompt.text
    assert f"{BASE_URL}/items/{item.id}" in prompt.text
    assert read_prompt(html_text(prompt.text)) is None  # no reply is asked for


def test_a_reply_names_fields_by_line_and_a_one_field_form_takes_the_whole_reply() -> None:
    schema, args = SCHEMAS["a dotted name beside an object"]
    fields = edit_fields(action(schema, args))
    values, stray = parse_lines("hello\naddress.city: Nice\nto: bea@example.com\nand more", fields)
    assert values == {"address.city": "Nice", "to": "bea@example.com\nand more"}
    assert stray == ["hello"]
    one = action({"type": "object", "properties": {"body": {"type": "string"}}}, {"body": "x"})
    assert parse_lines("two\nlines", edit_fields(one))[0] == {"body": "two\nlines"}


async def test_long_polling_hands_each_update_on_once_and_waits_out_a_429() -> None:
    async with TelegramPeer() as peer:
        api = TelegramApi(token=TOKEN, api_url=peer.url)
        seen: list[int] = []

        async def handle(update: dict[str, Any]) -> None:
            seen.append(update["update_id"])

        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)

        poller = Poller(api=api, handle=handle, timeout=1, sleep=sleep)
        await peer.push_update({"update_id": 10, "message": {}})
        await peer.push_update({"update_id": 11, "message": {}})
        poller.offset = 0
        await poller.poll_once()
        assert seen == [10, 11] and poller.offset == 12
        [call] = peer.calls_to("getUpdates")
        assert call.args["timeout"] == 1 and call.args["allowed_updates"] == [
            "message",
            "callback_query",
        ]
        peer.fail_next(1, status=429, retry_after=7, methods={"getUpdates"})
        await peer.push_update({"update_id": 12, "message": {}})
        loop_once = Poller(api=api, handle=handle, timeout=1, sleep=sleep)
        loop_once.offset = 12

        async def stop_after_wait(seconds: float) -> None:
            waits.append(seconds)
            await loop_once.poll_once()
            raise Stopped

        loop_once.sleep = stop_after_wait
        with pytest.raises(Stopped):
            await loop_once.run_forever()
        assert waits == [7] and seen == [10, 11, 12]
        assert json.dumps(peer.calls_to("getUpdates")[-1].args).count('"offset": 12') == 1
        await api.aclose()
