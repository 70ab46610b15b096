"""Teams' Adaptive Cards are valid for schema 1.5 and fit a Teams message whatever the tool
looks like (the adversarial schemas of the Slack modals, every text at its longest), for
everyone and for an approver; the edit dialog too, with errors; an untouched dialog gives back
the proposal; and nothing a model wrote is read as markdown."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pizzabot.agent.card_digest import card_digest
from pizzabot.channels.chat.forms import edit_fields, edited_args
from pizzabot.channels.teams.cards import form_card, form_values, item_card
from tests.peers.adaptive_cards import card_problems
from tests.peers.chat_cards import BASE_URL, HUGE, action, cards
from tests.scenarios.test_slack_modals import SCHEMAS


def test_every_card_and_dialog_is_one_teams_accepts() -> None:
    for what, item in cards():
        for decides in (False, True):
            card = item_card(item, base_url=BASE_URL, decides=decides, note=HUGE)
            assert card_problems(card) == [], (what, decides)
        fields = edit_fields(item)
        form = form_card(item, fields, base_url=BASE_URL)
        if form is not None:
            assert card_problems(form) == [], what
            errors = {f.name: HUGE for f in fields} | {"": HUGE}
            shown = form_card(item, fields, base_url=BASE_URL, values={}, errors=errors)
            assert shown is None or card_problems(shown) == [], what


def test_buttons_only_for_an_approver_and_each_carries_the_cards_digest() -> None:
    for what, item in cards():
        everyone = item_card(item, base_url=BASE_URL)
        assert [a["type"] for a in everyone["actions"]] == ["Action.OpenUrl"], what
        assert ("refresh" in everyone) is (not item.decided and item.box.value == "action"), what
        mine = item_card(item, base_url=BASE_URL, decides=True)
        buttons = mine["actions"][:-1]
        if item.risk.step_up and buttons:  # its Approve opens the card's page: no verb to send
            assert buttons[0] == {
                "type": "Action.OpenUrl",
                "title": "Approve with passkey",
                "url": f"{BASE_URL}/items/{item.id}",
            }, what
            buttons = buttons[1:]
        data = [
            a.get("data") or a.get("card", {}).get("actions", [{}])[0].get("data") for a in buttons
        ]
        assert all(a.get("verb") != "approve" for a in buttons) or not item.risk.step_up, what
        for datum in data:
            assert datum["item"] == item.id and datum["seen"] == card_digest(item), what


def test_an_untouched_dialog_gives_back_the_proposal() -> None:
    for what, (schema, args) in SCHEMAS.items():
        item = action(schema, args)
        fields = edit_fields(item)
        form = form_card(item, fields, base_url=BASE_URL)
        assert form is not None, what
        # Teams sends every input back as text (a number as its digits).
        sent: dict[str, Any] = {
            e["id"]: e["value"] if isinstance(e["value"], str) else json.dumps(e["value"])
            for e in form["body"]
            if str(e["type"]).startswith("Input.") and "value" in e
        }
        got, errors = edited_args(item, form_values(sent, fields), whole=True)
        assert errors == {}, what
        assert got == {k: v for k, v in args.items() if k != "huge"}, what  # inf: not shown


def test_a_models_text_is_never_read_as_markdown() -> None:
    item = action(
        {"type": "object", "properties": {"to": {"type": "string"}}},
        {"to": "[x](https://evil.example)"},
    )
    sneaky = replace(item, title="**bold** [link](https://evil.example) <at>Everyone</at>")
    card = item_card(sneaky, base_url=BASE_URL, decides=True)
    for element in card["body"]:
        if element["type"] == "TextBlock":  # the bot's own words only
            assert "evil" not in element["text"] and "bold" not in element["text"]
    assert "[link](https://evil.example)" in json.dumps(card)  # shown, as a TextRun
