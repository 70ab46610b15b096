"""What a card says, apart from how a platform draws it: the same words, facts, arguments,
outcome and buttons on Teams, Discord and Telegram, so an approver reads one card wherever
they are. Each channel escapes the text for its own markup and cuts it to its own limits.

Pure functions from the engine's nouns; every text here is plain (a model's or a tool's
words, unescaped): the renderer escapes all of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.model import (
    MAY_HAVE_HAPPENED,
    PREVIEW_LABEL,
    Box,
    Item,
    ItemKind,
    ItemStatus,
    Run,
    RunStatus,
)
from pizzabot.agent.undo import undo_line

__all__ = [
    "Button",
    "Card",
    "Verb",
    "card_of",
    "card_value",
    "clip",
    "decided_line",
    "item_url",
    "note_outcome",
    "read_value",
    "run_url",
    "stale_line",
    "value_text",
]

Verb = Literal["approve", "edit", "reject"]

_STATUS_WORD = {
    ItemStatus.APPROVED: "approved",
    ItemStatus.EDITED: "edited and approved",
    ItemStatus.REJECTED: "rejected",
    ItemStatus.EXPIRED: "expired",
    ItemStatus.CANCELLED: "closed",
}


@dataclass(frozen=True)
class Button:
    """One decision a card offers: its verb (what it asks the engine for) and its label. A
    button with a `url` opens that page instead of deciding: the approval of a call that needs
    a passkey (`pizzabot.agent.step_up`) is made on the card's web page, and a click on the
    platform alone decides nothing (the inbox refuses it and the person is told where to go)."""

    verb: Verb
    label: str
    url: str | None = None


@dataclass(frozen=True)
class Card:
    """One card: `heading` (skill and state), the item's `title` and `body`, short `facts`
    (tool, risk, who asked, the rule, the count), the arguments under `args_label`, how it
    ended (`outcome`, None while it waits), the `buttons` it offers while it waits, and the
    item's web page (`url`). An Unread note has no arguments and no buttons."""

    heading: str
    title: str
    body: str
    facts: tuple[str, ...]
    args_label: str
    args: tuple[tuple[str, str], ...]
    outcome: str | None
    buttons: tuple[Button, ...]
    url: str
    link_label: str = "Open on the web page"


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def item_url(base_url: str, item: Item) -> str:
    return f"{base_url.rstrip('/')}/items/{item.id}"


def run_url(base_url: str, run_id: str) -> str:
    return f"{base_url.rstrip('/')}/runs/{run_id}"


def value_text(value: Any) -> str:
    """An argument's value as a card shows it: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def card_value(item: Item) -> str:
    """What a decision button carries: the item and the digest of the card it is on
    (`pizzabot.agent.card_digest`), so a click counts only for what the card showed."""
    return f"{item.id}:{card_digest(item)}"


def read_value(value: str) -> tuple[str, str | None]:
    """(item id, the card's digest) from a button's value."""
    item_id, _, seen = value.partition(":")
    return item_id, seen or None


def _when(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC") if at is not None else "earlier"


def _risk(item: Item) -> str | None:
    risk = item.risk
    parts: list[str] = []
    if risk.may_have_happened:
        parts.append(MAY_HAVE_HAPPENED)
    if risk.impact:
        parts.append(f"impact {risk.impact}")
    if risk.reversible is not None:
        parts.append("reversible" if risk.reversible else "not reversible")
    if risk.scope:
        parts.append(f"scope {risk.scope}")
    if risk.hints:
        parts.append(f"the tool says {', '.join(risk.hints)} (not checked)")
    return "⚠️ Risk: " + " · ".join(parts) if parts else None


def _facts(item: Item) -> tuple[str, ...]:
    facts: list[str] = []
    if item.tool:
        tool, server = item.tool_place
        facts.append(f"🔧 Tool {tool} on server {server}" if server else f"🔧 Tool {tool}")
    risk = _risk(item)
    if risk:
        facts.append(risk)
    if item.requested_by:
        facts.append(f"🙋 Requested by {item.requested_by}")
    if item.risk.rule:
        facts.append(f"📏 Asked by {item.risk.rule}")
    if item.risk.approvals_text:
        facts.append(f"👥 {item.risk.approvals_text}")
    if item.risk.preview is not None:
        # Chat cards keep facts short: the start of it here, the whole on the web page.
        preview = item.risk.preview
        facts.append(f"🔍 {PREVIEW_LABEL} (by {preview.by}): {preview.text}")
    if item.risk.ladder:
        facts.append(f"⏰ If nobody decides: {item.risk.ladder}")
    if item.risk.steps:
        facts.append(f"⏱ So far: {' · '.join(item.risk.steps)}")
    return tuple(facts)


def _buttons(item: Item, url: str) -> tuple[Button, ...]:
    if item.decided:
        return ()
    match item.kind:
        case ItemKind.BUDGET:
            return (Button("approve", "Extend"), Button("reject", "Stop the run"))
        case ItemKind.QUESTION:
            return (Button("edit", "Answer"), Button("reject", "Decline"))
        case _:
            approve = (
                Button("approve", "Approve with passkey", url=url)
                if item.risk.step_up is not None
                else Button("approve", "Approve")
            )
            return (approve, Button("edit", "Edit"), Button("reject", "Reject"))


def _args(args: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), value_text(v)) for k, v in (args or {}).items())


def card_of(item: Item, *, base_url: str, outcome: RunStatus | None = None) -> Card:
    """The card of `item` as it is now; for an Unread note, `outcome` (see `note_outcome`)
    picks its mark."""
    if item.box is Box.UNREAD:
        return _note(item, base_url, outcome)
    budget = item.kind is ItemKind.BUDGET
    question = item.kind is ItemKind.QUESTION
    heading = "budget reached" if budget else "question" if question else "approval needed"
    if item.decided:
        heading = _STATUS_WORD.get(item.status, str(item.status))
    if item.status is ItemStatus.EDITED:
        label, shown = ("Answer" if question else "Edited arguments"), item.final_args
    else:
        label, shown = ("Extension" if budget else "Proposed arguments"), item.args
    return Card(
        heading=f"{item.skill}: {heading}",
        title=item.title,
        body=item.body,
        facts=_facts(item),
        args_label="" if question and not item.decided else label,
        args=() if question and not item.decided else _args(shown),
        outcome=decided_line(item) if item.decided else None,
        buttons=_buttons(item, item_url(base_url, item)),
        url=item_url(base_url, item),
    )


def _note(item: Item, base_url: str, outcome: RunStatus | None) -> Card:
    """An Unread note. A `notify` FYI that offers Undo links to its web page, where the
    Undo button is (`pizzabot.agent.undo`); once clicked, the card says how it went."""
    undo = item.undo
    offered = undo is not None and undo.state == "offered"
    return Card(
        heading=f"{_mark(outcome)} {item.title}",
        title="",
        body=item.body or "(no result text)",
        facts=(undo_line(undo),) if undo is not None and offered else (),
        args_label="",
        args=(),
        outcome=undo_line(undo) if undo is not None and not offered else None,
        buttons=(),
        url=item_url(base_url, item) if offered else run_url(base_url, item.run_id),
        link_label="Undo on the web page" if offered else "Open the run on the web page",
    )


def decided_line(item: Item) -> str:
    """How an action ended: who, through which channel, when, and why."""
    by, via, at = item.decided_by or "someone", item.decided_via or "?", _when(item.decided_at)
    budget = item.kind is ItemKind.BUDGET
    match item.status:
        case ItemStatus.APPROVED:
            return f"✅ {'Budget extended' if budget else 'Approved'} by {by} via {via} at {at}"
        case ItemStatus.EDITED:
            return f"✏️ Edited by {by} via {via} at {at}: it ran with the arguments above"
        case ItemStatus.REJECTED:
            line = f"❌ {'Run stopped' if budget else 'Rejected'} by {by} via {via} at {at}"
            return line + (f": {item.reason}" if item.reason else "")
        case ItemStatus.EXPIRED:
            line = f"⌛ Expired at {at}: nobody decided in time"
            return line + (f" ({item.reason})" if item.reason else "")
        case ItemStatus.CANCELLED:
            line = f"🚫 Closed: the run ended at {at} before anyone decided"
            return line + (f" ({item.reason})" if item.reason else "")  # e.g. withdrawn by …
        case _:
            return f"{item.status} at {at}"


def stale_line(item: Item) -> str:
    """What a click on an item decided already is told."""
    at = _when(item.decided_at)
    if item.status is ItemStatus.CANCELLED:
        return "This item is closed: the run ended before anyone decided."
    if item.status is ItemStatus.EXPIRED:
        return f"This item expired at {at}: nobody decided in time."
    word = _STATUS_WORD.get(item.status, str(item.status))
    by, via = item.decided_by or "someone", item.decided_via or "?"
    return f"Already {word} by {by} via {via} at {at}."


def note_outcome(item: Item, run: Run) -> RunStatus | None:
    """How `run` had ended when `item`, its Unread note, was written (None: not known)."""
    # The note and the run's end are written in one transaction with one clock reading.
    if run.status.terminal and run.finished_at == item.created_at:
        return run.status
    return None


def _mark(outcome: RunStatus | None) -> str:
    if outcome is None:
        return "ℹ️"
    return "✅" if outcome is RunStatus.DONE else "⚠️"
