"""A `notify` FYI's Undo on the chat platforms whose buttons only decide (Teams, Discord,
Telegram): while it is offered, the card says what Undo would run and links to the FYI's web
page, where the Undo button is; once clicked, every card says how it went."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Undo
from pizzabot.channels.discord import render as discord
from pizzabot.channels.teams.cards import item_card
from pizzabot.channels.telegram import render as telegram

BASE = "https://pizza.example"
AT = datetime(2026, 1, 1, 9, 30, tzinfo=UTC)
FYI = Item(
    id="i1",
    run_id="r1",
    skill="crm",
    box=Box.UNREAD,
    kind=ItemKind.RUN,
    status=ItemStatus.UNREAD,
    title="FYI: crm ran contacts.add_contact",
    body="contacts.add_contact ran without asking",
    created_at=AT,
    tool="contacts.add_contact",
    args={"email": "ann@example.com"},
    undo=Undo(tool="contacts.delete_contact", args={"id": "c-1", "email": "ann@example.com"}),
)


def shown(item: Item) -> list[str]:
    """The card as each platform renders it, as one text apiece (without backslashes: the
    platforms' Markdown escapes are not what a person reads)."""
    cards = [
        item_card(item, base_url=BASE, decides=True),
        discord.card_message(item, base_url=BASE),
        vars(telegram.card_message(item, base_url=BASE)),
    ]
    return [json.dumps(card, ensure_ascii=False).replace("\\", "") for card in cards]


def test_an_offered_undo_links_to_the_web_page() -> None:
    for card in shown(FYI):
        assert "Undo offered: contacts.delete_contact" in card
        assert f"{BASE}/items/i1" in card, card


def test_every_card_says_how_the_undo_went() -> None:
    assert FYI.undo is not None
    done = replace(FYI.undo, state="done", by="U1", via="slack", at=AT, outcome="deleted c-1")
    for card in shown(replace(FYI, undo=done)):
        assert "Undone by U1 via slack at 2026-01-01 09:30 UTC" in card and "deleted c-1" in card
        assert "Undo offered" not in card
    failed = replace(done, state="failed", outcome="no contact c-1")
    for card in shown(replace(FYI, undo=failed)):
        assert "Undo failed (started by U1 via slack" in card and "no contact c-1" in card
