"""Discord messages, buttons and modals for cards: an embed with the card's words, a row of
buttons, and a modal of text inputs for an edit, a reject's reason or a follow-up.

Discord's limits shape this: an embed's title holds 256 characters, its description 4,096,
a field's name 256 and value 1,024, at most 25 fields and 6,000 characters in all; a button's
label 80 and its `custom_id` 100; a select menu 25 options of 100 characters; a modal's title
45, at most 5 text inputs, each with a label of 45, a value of 4,000 and a placeholder of 100.
A form of more than five fields is edited five at a time: a menu picks the fields to change,
the rest stay as proposed. What cannot be typed in a modal at all (a value over 4,000
characters, more fields than a menu holds) is left to the item's web page. Everything a model or a tool wrote is
escaped as Discord markdown, and no message may mention anyone (`allowed_mentions`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pizzabot.agent.argforms import Field
from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.model import Item, RunStatus
from pizzabot.channels.chat.card import Button, Card, card_of, card_value, clip

__all__ = [
    "CUSTOM_ID_MAX",
    "EMBED_TOTAL_MAX",
    "MODAL_INPUTS_MAX",
    "card_message",
    "edit_modal",
    "esc",
    "field_picker",
    "fields_digest",
    "modal_values",
    "note",
    "read_custom_id",
    "reject_modal",
    "reply_modal",
]

CUSTOM_ID_MAX = 100
EMBED_TOTAL_MAX = 6000
MODAL_INPUTS_MAX = 5
_LABEL_MAX = 45
_INPUT_MAX = 4000
_PLACEHOLDER_MAX = 100
_CONTENT_MAX = 2000
_FIELD_VALUE_MAX = 1024
_FIELDS_MAX = 25
_ARGS_BUDGET = 2000
_OPTIONS_MAX = 25
_MARKDOWN = set("\\*_~`|>[]()#-:<@")
_STYLE = {"approve": 3, "edit": 1, "reject": 4}  # success, primary, danger
_NO_MENTIONS: dict[str, Any] = {"parse": []}

#: The prefix of every custom_id this bot makes; verbs after it.
PREFIX = "pz"


def esc(text: str, limit: int) -> str:
    """`text` as Discord markdown shows it literally, at most `limit` characters (escapes
    counted), an ellipsis marking a cut."""
    out: list[str] = []
    used = 0
    for ch in text:
        piece = "\\" + ch if ch in _MARKDOWN else ch
        if used + len(piece) > limit - 1:
            out.append("…")
            return "".join(out)
        out.append(piece)
        used += len(piece)
    return "".join(out)


def _custom_id(*parts: str) -> str | None:
    value = ":".join((PREFIX, *parts))
    return value if len(value) <= CUSTOM_ID_MAX else None


def read_custom_id(value: str) -> list[str] | None:
    """The parts after the prefix of one of this bot's custom_ids; None for any other."""
    parts = value.split(":")
    return parts[1:] if len(parts) >= 2 and parts[0] == PREFIX else None


def _buttons(item: Item, buttons: Sequence[Button]) -> list[dict[str, Any]]:
    row: list[dict[str, Any]] = []
    for button in buttons:
        if button.url is not None:  # approved on the web page, with a passkey: a link button
            row.append({"type": 2, "style": 5, "label": button.label, "url": button.url})
            continue
        custom = _custom_id(button.verb, card_value(item))
        if custom is not None:
            row.append(
                {
                    "type": 2,
                    "style": _STYLE[button.verb],
                    "label": button.label,
                    "custom_id": custom,
                }
            )
    return [{"type": 1, "components": row}] if row else []


def _reply_row(item: Item) -> list[dict[str, Any]]:
    custom = _custom_id("reply", item.run_id)
    if custom is None:
        return []
    button = {"type": 2, "style": 2, "label": "Reply to the run", "custom_id": custom}
    return [{"type": 1, "components": [button]}]


def _fields(card: Card) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = []
    used = 0
    for key, value in card.args:
        name, shown = clip(key, 100), esc(value, 200) or "\u200b"
        if used + len(name) + len(shown) > _ARGS_BUDGET or len(fields) == _FIELDS_MAX - 1:
            more = f"[on the web page]({card.url})"
            fields.append({"name": "… more arguments", "value": more, "inline": False})
            break
        fields.append({"name": name, "value": shown, "inline": False})
        used += len(name) + len(shown)
    return fields


def embed_length(embed: Mapping[str, Any]) -> int:
    """What Discord counts toward an embed's 6,000 characters."""
    total = len(str(embed.get("title") or "")) + len(str(embed.get("description") or ""))
    total += len(str((embed.get("footer") or {}).get("text") or ""))
    for f in embed.get("fields") or []:
        total += len(str(f.get("name") or "")) + len(str(f.get("value") or ""))
    return total


def _embed(card: Card, body_limit: int) -> dict[str, Any]:
    lines: list[str] = []
    if card.title:
        lines.append(f"**{esc(card.title, 300)}**")
    if card.body and body_limit > 0:
        lines.append(esc(card.body, body_limit))
    lines += [esc(fact, 200) for fact in card.facts[:6]]
    if card.args_label:
        lines.append(f"**{card.args_label}**" + ("" if card.args else ": (none)"))
    lines.append(f"[{card.link_label}]({card.url})")
    embed: dict[str, Any] = {
        "title": clip(card.heading, 256),
        "description": clip("\n".join(lines), 4096),
        "url": card.url,
        "color": 0xB5442B,
    }
    fields = _fields(card)
    if fields:
        embed["fields"] = fields
    if card.outcome:
        embed["footer"] = {"text": clip(card.outcome, 500)}
    return embed


def card_message(item: Item, *, base_url: str, outcome: RunStatus | None = None) -> dict[str, Any]:
    """The message for `item` as it is now: an embed, and its buttons while it waits (an
    Unread note: a button to reply to the run). The body gives way until the embed fits."""
    card = card_of(item, base_url=base_url, outcome=outcome)
    body_limit = 3000 if not card.args_label else 1000
    embed = _embed(card, body_limit)
    while embed_length(embed) > EMBED_TOTAL_MAX and body_limit > 0:
        body_limit = body_limit // 2 if body_limit > 100 else 0
        embed = _embed(card, body_limit)
    rows = _buttons(item, card.buttons) if card.buttons else []
    if item.box.value == "unread":
        rows = _reply_row(item)
    return {
        "content": clip(card.heading, _CONTENT_MAX),
        "embeds": [embed],
        "components": rows,
        "allowed_mentions": _NO_MENTIONS,
    }


def note(text: str, *, components: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A message only the person who acted sees (an interaction's ephemeral answer)."""
    data: dict[str, Any] = {
        "content": esc(text, _CONTENT_MAX),
        "flags": 64,
        "allowed_mentions": _NO_MENTIONS,
    }
    if components is not None:
        data["components"] = components
    return data


def again_button(item_id: str, seen: str) -> list[dict[str, Any]]:
    """A row with the button that opens the edit form again (after a refused form)."""
    custom = _custom_id("edit", f"{item_id}:{seen}")
    if custom is None:
        return []
    button = {"type": 2, "style": 1, "label": "Edit again", "custom_id": custom}
    return [{"type": 1, "components": [button]}]


def fields_digest(fields: Sequence[Field]) -> str:
    """Names the field list a modal was built from, so its inputs are read against the same."""
    names = json.dumps([f.name for f in fields], ensure_ascii=False)
    return hashlib.sha256(names.encode()).hexdigest()[:16]


def _shown(field: Field) -> str:
    """What an input starts with: the proposal, but never a number no one could send back
    (a model's 1e999): the input is left empty, and its placeholder says why."""
    if isinstance(field.value, bool):
        return "yes" if field.value else "no"
    if field.kind in {"number", "integer"} and not _finite(field.value):
        return ""
    return field.value or ""


def _finite(value: str | bool | None) -> bool:
    if not isinstance(value, str):
        return True
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


def _placeholder(field: Field) -> str | None:
    if field.kind in {"number", "integer"} and not _finite(field.value):
        hint = f"the proposed value {field.value} cannot be shown here"
    elif field.kind == "checkbox":
        hint = "yes or no"
    elif field.options:
        hint = "one of: " + ", ".join(field.options)
    elif field.kind == "json":
        hint = "JSON"
    else:
        hint = field.description or ""
    return clip(hint, _PLACEHOLDER_MAX) or None


def _input(index: int, field: Field) -> dict[str, Any]:
    value = _shown(field)
    text: dict[str, Any] = {
        "type": 4,
        "custom_id": f"f{index}",
        "label": clip(field.label, _LABEL_MAX),
        "style": 2 if field.kind in {"textarea", "json"} or "\n" in value else 1,
        "required": False,
    }
    if value:
        text["value"] = value
    placeholder = _placeholder(field)
    if placeholder:
        text["placeholder"] = placeholder
    return {"type": 1, "components": [text]}


def _fits(field: Field) -> bool:
    return len(_shown(field)) <= _INPUT_MAX


def edit_modal(
    item: Item, fields: Sequence[Field], chosen: Sequence[int] | None = None
) -> dict[str, Any] | None:
    """The edit form (an answer's, for a question) as a modal of the `chosen` fields (by
    index; None: all of them); None when Discord cannot hold it (more than five inputs, a
    value over 4,000 characters, nothing to type)."""
    picked = list(range(len(fields))) if chosen is None else list(chosen)
    if (
        not picked
        or len(picked) > MODAL_INPUTS_MAX
        or any(not 0 <= i < len(fields) for i in picked)
    ):
        return None
    if any(not _fits(fields[i]) for i in picked):
        return None
    which = "*" if chosen is None else ".".join(str(i) for i in picked)
    custom = _custom_id("form", item.id, card_digest(item), fields_digest(fields), which)
    if custom is None:
        return None
    title = "Answer" if item.kind.value == "question" else "Edit arguments"
    return {
        "custom_id": custom,
        "title": title,
        "components": [_input(i, fields[i]) for i in picked],
    }


def field_picker(item: Item, fields: Sequence[Field]) -> dict[str, Any] | None:
    """For a form longer than a modal: a menu of the fields (up to five) to change, whose
    choice opens a modal of those; None when there are more than a menu holds (25) or none
    can be typed in Discord."""
    usable = [(i, f) for i, f in enumerate(fields) if _fits(f)]
    if not usable or len(usable) > _OPTIONS_MAX:
        return None
    custom = _custom_id("pick", item.id, card_digest(item), fields_digest(fields))
    if custom is None:
        return None
    options = []
    for i, field in usable:
        option = {"label": clip(field.label, 100) or f"field {i + 1}", "value": str(i)}
        now = _shown(field)
        if now:
            option["description"] = clip(f"now: {now}", 100)
        options.append(option)
    menu = {
        "type": 3,
        "custom_id": custom,
        "placeholder": "Which arguments do you change? (up to five)",
        "options": options,
        "min_values": 1,
        "max_values": min(MODAL_INPUTS_MAX, len(options)),
    }
    return note(
        f"{item.title}: pick the arguments to change; the others stay as proposed.",
        components=[{"type": 1, "components": [menu]}],
    )


def reject_modal(item: Item) -> dict[str, Any] | None:
    """Ask for an optional reason: the agent reads it."""
    custom = _custom_id("why", item.id, card_digest(item))
    if custom is None:
        return None
    verb = "Decline" if item.kind.value == "question" else "Reject"
    reason = {
        "type": 4,
        "custom_id": "reason",
        "label": "Why? The agent reads this",
        "style": 2,
        "required": False,
        "max_length": _INPUT_MAX,
    }
    return {
        "custom_id": custom,
        "title": clip(f"{verb}: {item.title}", _LABEL_MAX),
        "components": [{"type": 1, "components": [reason]}],
    }


def reply_modal(run_id: str) -> dict[str, Any] | None:
    """Ask for a message to the run."""
    custom = _custom_id("say", run_id)
    if custom is None:
        return None
    text = {
        "type": 4,
        "custom_id": "text",
        "label": "Your message to the run",
        "style": 2,
        "required": True,
        "max_length": _INPUT_MAX,
    }
    return {
        "custom_id": custom,
        "title": "Reply to the run",
        "components": [{"type": 1, "components": [text]}],
    }


def modal_values(data: Mapping[str, Any]) -> dict[str, str]:
    """A submitted modal's values by their input's custom_id."""
    values: dict[str, str] = {}
    for row in data.get("components") or []:
        for component in row.get("components") or [] if isinstance(row, Mapping) else []:
            if isinstance(component, Mapping) and isinstance(component.get("custom_id"), str):
                values[component["custom_id"]] = str(component.get("value") or "")
    return values
