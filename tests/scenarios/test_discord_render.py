"""Discord's cards, menus and modals stay within Discord's limits whatever the tool looks like
(the adversarial schemas of the Slack modals, every text at its longest), and an untouched
modal gives back the proposal."""

from __future__ import annotations

import re
from typing import Any

from pizzabot.agent.card_digest import card_digest
from pizzabot.channels.chat.forms import edit_fields, edited_args
from pizzabot.channels.discord import render
from tests.peers.chat_cards import BASE_URL, HUGE, action, cards
from tests.peers.discord_api import payload_problems, response_problems
from tests.scenarios.test_slack_modals import SCHEMAS


def modal(data: dict[str, Any] | None) -> list[str]:
    assert data is not None
    return response_problems({"type": 9, "data": data})


def test_every_card_menu_and_modal_is_one_discord_accepts() -> None:
    for what, item in cards():
        message = render.card_message(item, base_url=BASE_URL)
        assert payload_problems(message) == [], what
        fields = edit_fields(item)
        edit = render.edit_modal(item, fields)
        if edit is not None:
            assert modal(edit) == [], what
        picker = render.field_picker(item, fields)
        if picker is not None:
            assert response_problems({"type": 4, "data": picker}) == [], what
            [menu] = picker["components"][0]["components"]
            chosen = [int(o["value"]) for o in menu["options"][: menu["max_values"]]]
            assert modal(render.edit_modal(item, fields, chosen)) == [], what
        assert modal(render.reject_modal(item)) == [], what
        assert modal(render.reply_modal(item.run_id)) == [], what
        note = render.note(HUGE, components=render.again_button(item.id, card_digest(item)))
        assert response_problems({"type": 4, "data": note}) == [], what


def test_buttons_carry_the_item_and_the_cards_digest() -> None:
    for what, item in cards():
        message = render.card_message(item, base_url=BASE_URL)
        if item.decided:
            assert message["components"] == [], what
            continue
        for row in message["components"]:
            for button in row["components"]:
                if item.risk.step_up and button["label"] == "Approve with passkey":
                    # Its Approve is a link to the card's page: no click reaches the bot.
                    assert button == {
                        "type": 2,
                        "style": 5,
                        "label": "Approve with passkey",
                        "url": f"{BASE_URL}/items/{item.id}",
                    }, what
                    continue
                parts = render.read_custom_id(button["custom_id"])
                assert parts is not None, what
                if parts[0] != "reply":
                    assert parts[1:] == [item.id, card_digest(item)], what


def test_an_untouched_modal_gives_back_the_proposal() -> None:
    for what, (schema, args) in SCHEMAS.items():
        item = action(schema, args)
        fields = edit_fields(item)
        data = render.edit_modal(item, fields)
        assert data is not None, what
        values = {
            f"f{i}": row["components"][0].get("value", "")
            for i, row in enumerate(data["components"])
        }
        raw: dict[str, str | bool | None] = {
            f.name: values.get(f"f{i}") or None for i, f in enumerate(fields)
        }
        got, errors = edited_args(item, raw, whole=True)
        assert errors == {}, what
        assert got == {k: v for k, v in args.items() if k != "huge"}, what  # inf: not shown


def test_markdown_and_mentions_in_a_models_text_stay_text() -> None:
    item = action({"type": "object", "properties": {"to": {"type": "string"}}}, {"to": "x"})
    sneaky = "@everyone **bold** [link](https://evil.example) <@123> # title\n- item"
    message = render.card_message(
        item.__class__(**{**item.__dict__, "title": sneaky}), base_url=BASE_URL
    )
    description = message["embeds"][0]["description"]
    assert "[link](" not in description and "**bold**" not in description
    assert re.sub(r"\\(.)", r"\1", description).count(sneaky.split("\n")[0]) == 1
    assert message["allowed_mentions"] == {"parse": []}
