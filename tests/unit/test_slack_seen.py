"""The Home tab's rows and the edit and reject modals show what their digest binds: the
arguments, who asked and the rule that asked (pure functions, checked against Slack's limits)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pizzabot.agent.model import ItemKind, Preview, Risk
from pizzabot.channels.slack import blocks
from pizzabot.channels.slack.blocks import ModalRef
from pizzabot.channels.slack.cards import card_value
from pizzabot.channels.slack.home import ACTIONS_SHOWN, HomeInbox, home_view
from tests.peers.slack_api import payload_problems
from tests.unit.test_slack_blocks import BASE, action

ASKED = Risk(rule="deploys need two people", approvals_required=2)


def asked_item(**over: Any) -> Any:
    return action(**{"requested_by": "ship-agent", "risk": ASKED, **over})


def home_row(view: dict[str, Any], item_id: str) -> str:
    """The text of an item's row: its section and context, the blocks before its buttons."""
    shown = view["blocks"]
    [at] = [n for n, b in enumerate(shown) if b.get("block_id") == f"decide:{item_id}"]
    return json.dumps(shown[at - 2 : at], ensure_ascii=False)


def view_text(view: dict[str, Any]) -> str:
    return json.dumps(view["blocks"], ensure_ascii=False)


def test_a_home_row_shows_the_arguments_and_who_asked() -> None:
    item = asked_item()
    view = home_view(HomeInbox(actions=[item], unread=[], may_start=False), base_url=BASE)
    row = home_row(view, item.id)
    assert "*Proposed arguments*" in row
    assert "*to*: ann@example.com" in row and "*copies*: 2" in row
    assert "🙋 Requested by ship-agent" in row
    assert "📏 Asked by deploys need two people" in row and "👥 0 of 2 approved" in row
    assert payload_problems("views.publish", {"view": view}) == []


def test_a_home_row_says_nothing_of_a_requester_there_is_none() -> None:
    item = action()
    row = home_row(home_view(HomeInbox([item], [], False), base_url=BASE), item.id)
    assert "Requested by" not in row and "*to*: ann@example.com" in row


def test_long_and_hostile_arguments_are_cut_escaped_and_linked_in_home() -> None:
    url = f"{BASE}/items/"
    many = {f"field{n}": "<!channel> & " * 40 for n in range(30)}
    items = [
        asked_item(
            id=f"it{n}",
            title="<@U0BOSS> " * 100,
            body="&" * 2000,
            args=many,
            requested_by="<!here>" * 100,
        )
        for n in range(ACTIONS_SHOWN + 5)
    ]
    view = home_view(HomeInbox(actions=items, unread=[], may_start=True), base_url=BASE)
    assert payload_problems("views.publish", {"view": view}) == []
    row = home_row(view, "it0")
    assert "<!channel>" not in row and "<!here>" not in row and "<@U0BOSS>" not in row
    assert "&lt;!here&gt;" in row  # who asked, escaped and cut
    assert f"<{url}it0|see all>" in row
    assert f"<{url}it0|more arguments on the web page>" in row


def test_a_home_row_shows_the_preview_its_buttons_bind_cut_and_escaped() -> None:
    preview = Preview(text="Refund 40 EUR to <!channel> `ok`" + " & more" * 400, by="crm.dry")
    item = asked_item(risk=replace(ASKED, preview=preview), body="&" * 2000)
    view = home_view(HomeInbox([item], [], False), base_url=BASE)
    row = home_row(view, item.id)
    assert "🔍 Preview" in row and "Refund 40 EUR to &lt;!channel&gt; ˋokˋ" in row
    assert "<!channel>" not in row
    assert f"<{BASE}/items/it1|whole preview on the web page>" in row
    assert payload_problems("views.publish", {"view": view}) == []


def test_a_budget_or_a_question_in_home_names_what_its_values_are() -> None:
    budget = asked_item(id="b1", kind=ItemKind.BUDGET, args={"extra_steps": 20}, schema=None)
    question = asked_item(id="q1", kind=ItemKind.QUESTION, args={"answer": "yes"})
    view = home_view(HomeInbox([budget, question], [], False), base_url=BASE)
    assert "*Extension*" in home_row(view, "b1") and "*extra_steps*: 20" in home_row(view, "b1")
    assert "*Proposed answer*" in view_text(view)


def test_the_edit_modal_shows_who_asked_and_the_rule() -> None:
    view = blocks.edit_modal(asked_item(), ref=ModalRef("it1"), base_url=BASE)
    text = view_text(view)
    assert "🙋 Requested by ship-agent" in text and "📏 Asked by deploys need two people" in text
    assert payload_problems("views.open", {"view": view}) == []
    plain = blocks.edit_modal(action(), ref=ModalRef("it1"), base_url=BASE)
    assert "Requested by" not in view_text(plain)


def test_the_reject_modal_shows_the_arguments_and_who_asked() -> None:
    view = blocks.reject_modal(asked_item(), ref=ModalRef("it1", "C1"))
    text = view_text(view)
    assert "*Proposed arguments*" in text and "*to*: ann@example.com" in text
    assert "🙋 Requested by ship-agent" in text and "👥 0 of 2 approved" in text
    assert view["blocks"][-1]["block_id"] == blocks.REASON_BLOCK
    assert payload_problems("views.open", {"view": view}) == []


def test_long_and_hostile_arguments_are_cut_and_escaped_in_the_reject_modal() -> None:
    args = {f"field{n}": "<!channel> " * 100 for n in range(40)}
    item = asked_item(title="<!here> " * 500, args=args, requested_by="<@U0BOSS>" * 50)
    view = blocks.reject_modal(item, ref=ModalRef("it1", "C1"))
    text = view_text(view)
    assert "<!channel>" not in text and "<!here>" not in text and "<@U0BOSS>" not in text
    assert "_(cut here)_" in text and "… more arguments on the web page" in text
    assert payload_problems("views.open", {"view": view}) == []


def test_a_requester_changes_what_the_home_buttons_bind() -> None:
    """Who asked is in the digest the buttons carry, so a row showing someone else is
    another card: the shown requester and the bound one cannot differ."""
    item = asked_item()
    other = replace(item, requested_by="someone-else")
    view = home_view(HomeInbox([item], [], False), base_url=BASE)
    [row] = [b for b in view["blocks"] if b.get("block_id") == f"decide:{item.id}"]
    values = {e.get("value") for e in row["elements"] if e.get("value")}
    assert values == {card_value(item)} != {card_value(other)}
