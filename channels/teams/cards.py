"""Adaptive Cards (schema 1.5) for Teams: an item's card, the same card with its buttons for an
approver, and the edit form a dialog (task module) shows.

Every card a conversation gets shows the item to everyone, without buttons: Teams refreshes
it for each person who looks (`refresh` with `Action.Execute`), and the bot answers that
refresh with the buttons only for someone who may decide. Approve and Reject are
`Action.Execute` (Reject asks for its reason in a `ShowCard`); Edit opens a dialog
(`Action.Submit` with `task/fetch`).

Text a model, a tool or a skill wrote is shown in `TextRun`s, which Teams never reads as
markdown, so it can neither format nor link. A Teams message holds about 28 KB: every part is
cut to a share of that, and the body gives way until the card fits; a form that does not fit
a dialog is left to the item's web page.
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
from pizzabot.channels.chat.card import Card, card_of, clip

__all__ = [
    "CARD_BYTES_MAX",
    "CONTENT_TYPE",
    "attachment",
    "fields_digest",
    "form_card",
    "item_card",
]

CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
#: What a card may take of a Teams message (28 KB in all, with the activity around it).
CARD_BYTES_MAX = 26_000
_ARGS_BUDGET = 6000
_VALUE_CUT = 400
_FORM_FIELDS_MAX = 60
_CHOICES_MAX = 100


def _run(text: str, **style: Any) -> dict[str, Any]:
    return {"type": "TextRun", "text": text, **style}


def _rich(*runs: dict[str, Any], **style: Any) -> dict[str, Any]:
    return {"type": "RichTextBlock", "inlines": list(runs), **style}


def _text(text: str, **style: Any) -> dict[str, Any]:
    """A TextBlock of the bot's own words (markdown is fine here: nothing foreign in it)."""
    return {"type": "TextBlock", "text": text, "wrap": True, **style}


def _data(verb: str, item: Item, **more: Any) -> dict[str, Any]:
    return {"pz": verb, "item": item.id, "seen": card_digest(item), **more}


def _actions(item: Item, card: Card) -> list[dict[str, Any]]:
    """The decision buttons of a pending item, for someone who may decide it."""
    actions: list[dict[str, Any]] = []
    for button in card.buttons:
        if button.url is not None:  # approved on the web page, with a passkey
            actions.append({"type": "Action.OpenUrl", "title": button.label, "url": button.url})
        elif button.verb == "approve":
            actions.append(
                {
                    "type": "Action.Execute",
                    "title": button.label,
                    "verb": "approve",
                    "data": _data("approve", item),
                    "style": "positive",
                }
            )
        elif button.verb == "edit":
            data = _data("edit", item, msteams={"type": "task/fetch"})
            actions.append({"type": "Action.Submit", "title": button.label, "data": data})
        else:
            reason = {
                "type": "Input.Text",
                "id": "reason",
                "label": "Why? The agent reads this",
                "isMultiline": True,
                "maxLength": 4000,
            }
            reject = {
                "type": "Action.Execute",
                "title": button.label,
                "verb": "reject",
                "data": _data("reject", item),
                "style": "destructive",
            }
            sub = {"type": "AdaptiveCard", "body": [reason], "actions": [reject]}
            actions.append({"type": "Action.ShowCard", "title": button.label, "card": sub})
    return actions


def _body(card: Card, body_limit: int, note: str | None) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = []
    if note:
        body.append(_rich(_run(clip(note, 1000), color="Attention", weight="Bolder")))
    body.append(_rich(_run(clip(card.heading, 200), size="Medium", weight="Bolder")))
    if card.title:
        body.append(_rich(_run(clip(card.title, 500), weight="Bolder")))
    if card.body and body_limit > 0:
        body.append(_rich(_run(clip(card.body, body_limit))))
    for fact in card.facts[:6]:
        body.append(_rich(_run(clip(fact, 300), isSubtle=True, size="Small"), spacing="None"))
    if card.args_label:
        body.append(_text(card.args_label, weight="Bolder"))
        used = 0
        for key, value in card.args:
            shown_key, shown = clip(key, 100), clip(value, _VALUE_CUT)
            if used + len(shown_key) + len(shown) > _ARGS_BUDGET:
                body.append(_text(f"… [more arguments on the web page]({card.url})"))
                break
            runs = (_run(shown_key, weight="Bolder"), _run(": " + shown))
            body.append(_rich(*runs, spacing="None"))
            used += len(shown_key) + len(shown)
        if not card.args:
            body.append(_rich(_run("(no arguments)", italic=True)))
    if card.outcome:
        body.append(_rich(_run(clip(card.outcome, 1000), weight="Bolder")))
    return body


def item_card(
    item: Item,
    *,
    base_url: str,
    outcome: RunStatus | None = None,
    decides: bool = False,
    note: str | None = None,
) -> dict[str, Any]:
    """The card of `item` as it is now. `decides`: for someone who may decide it (with its
    buttons while it waits); `note`: said at the top, to the one person this card is for."""
    card = card_of(item, base_url=base_url, outcome=outcome)
    body_limit = 3000 if not card.args_label else 1500
    while True:
        content = _card(item, card, body_limit, decides=decides, note=note)
        if len(json.dumps(content).encode()) <= CARD_BYTES_MAX or body_limit <= 0:
            return content
        body_limit = body_limit // 2 if body_limit > 100 else 0


def _card(
    item: Item, card: Card, body_limit: int, *, decides: bool, note: str | None
) -> dict[str, Any]:
    actions = _actions(item, card) if decides and card.buttons else []
    actions.append({"type": "Action.OpenUrl", "title": card.link_label, "url": card.url})
    content: dict[str, Any] = {
        "type": "AdaptiveCard",
        "$schema": SCHEMA,
        "version": "1.5",
        "body": _body(card, body_limit, note),
        "actions": actions,
    }
    if card.buttons:  # still waiting: each viewer's copy is asked for (see the docstring)
        refresh = {"type": "Action.Execute", "verb": "refresh", "data": _data("refresh", item)}
        content["refresh"] = {"action": refresh}
    return content


def attachment(content: Mapping[str, Any]) -> dict[str, Any]:
    return {"contentType": CONTENT_TYPE, "content": dict(content)}


# -- the edit form ---------------------------------------------------------------------------


def fields_digest(fields: Sequence[Field]) -> str:
    """Names the field list a form was built from, so its inputs are read against the same."""
    names = json.dumps([f.name for f in fields], ensure_ascii=False)
    return hashlib.sha256(names.encode()).hexdigest()[:16]


def _number(value: str | bool | None) -> float | int | None:
    if not isinstance(value, str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number) or abs(number) > 2**53:
        return None
    return (
        int(number)
        if number.is_integer() and "." not in value and "e" not in value.lower()
        else number
    )


def _finite_text(value: str | bool | None) -> bool:
    try:
        return isinstance(value, str) and math.isfinite(float(value))
    except ValueError:
        return False


def _input(index: int, field: Field, value: str | bool | None) -> dict[str, Any]:
    base: dict[str, Any] = {"id": f"f{index}", "label": clip(field.label, 200)}
    if field.kind == "checkbox":
        on = value is True or (
            isinstance(value, str) and value.lower() in {"true", "yes", "on", "1"}
        )
        return {
            **base,
            "type": "Input.Toggle",
            "title": clip(field.label, 200),
            "value": "true" if on else "false",
            "valueOn": "true",
            "valueOff": "false",
        }
    if field.kind in {"number", "integer"}:
        number = _number(value)
        if number is None and _finite_text(value):
            # More digits than a client's number keeps exactly: typed as text, kept exact.
            return {**base, "type": "Input.Text", "value": str(value), "placeholder": "a number"}
        element = {**base, "type": "Input.Number"}
        if number is not None:
            element["value"] = number
        elif isinstance(value, str) and value:
            element["placeholder"] = clip(f"the proposed value {value} cannot be shown here", 200)
        return element
    if field.kind == "select" and 0 < len(field.options) <= _CHOICES_MAX:
        choices = [
            {"title": clip(label, 200), "value": option}
            for option, label in field.labelled_options()
        ]
        element = {**base, "type": "Input.ChoiceSet", "choices": choices, "style": "compact"}
        if isinstance(value, str) and value in field.options:
            element["value"] = value
        return element
    text = value if isinstance(value, str) else ""
    element = {**base, "type": "Input.Text"}
    if field.kind in {"textarea", "json", "multiselect"} or "\n" in text:
        element["isMultiline"] = True
    if text:
        element["value"] = text
    hint = field.description or (
        ("one or more of: " + ", ".join(field.options)) if field.options else ""
    )
    if hint:
        element["placeholder"] = clip(hint, 200)
    return element


def form_card(
    item: Item,
    fields: Sequence[Field],
    *,
    base_url: str,
    values: Mapping[str, str | bool | None] | None = None,
    errors: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The edit form (an answer's, for a question) a dialog shows, prefilled with the
    proposal, or with what was typed and the errors under their fields; None when it does not
    fit a dialog (the item's web page holds it)."""
    if not fields or len(fields) > _FORM_FIELDS_MAX:
        return None
    errors = dict(errors or {})
    body: list[dict[str, Any]] = []
    if errors:
        body.append(
            _rich(_run("Not applied; the item still waits.", color="Attention", weight="Bolder"))
        )
    tool = item.tool_place[0] or item.title
    body.append(_rich(_run(f"Change the arguments of {clip(tool, 200)}, then run it.")))
    for index, field in enumerate(fields):
        value = values.get(field.name) if values is not None else field.value
        body.append(_input(index, field, value))
        said = errors.pop(field.name, None)
        if said:
            body.append(_rich(_run(clip(said, 500), color="Attention"), spacing="None"))
    for name, message in errors.items():  # errors that name no one field
        body.append(_rich(_run(clip(f"{name or 'arguments'}: {message}", 500), color="Attention")))
    submit = {
        "type": "Action.Submit",
        "title": "Answer" if item.kind.value == "question" else "Run with these",
        "data": _data("form", item, shape=fields_digest(fields)),
    }
    url = f"{base_url.rstrip('/')}/items/{item.id}"
    content = {
        "type": "AdaptiveCard",
        "$schema": SCHEMA,
        "version": "1.5",
        "body": body,
        "actions": [
            submit,
            {"type": "Action.OpenUrl", "title": "Open on the web page", "url": url},
        ],
    }
    return content if len(json.dumps(content).encode()) <= CARD_BYTES_MAX else None


def form_values(data: Mapping[str, Any], fields: Sequence[Field]) -> dict[str, str | bool | None]:
    """A submitted form's values by field name (Teams sends every input as text; a number
    or a toggle may come as itself)."""
    raw: dict[str, str | bool | None] = {}
    for index, field in enumerate(fields):
        value = data.get(f"f{index}")
        if value is None or value == "":
            raw[field.name] = False if field.kind == "checkbox" else None
        elif isinstance(value, bool):
            raw[field.name] = value
        elif isinstance(value, int | float):
            raw[field.name] = json.dumps(value)
        else:
            raw[field.name] = str(value)
    return raw
