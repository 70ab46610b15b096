"""What Teams accepts of an Adaptive Card: the part of the Adaptive Card schema 1.5 the bot
uses, written out strictly (every element and action the bot sends, with every property 1.5
gives it and the values its enums allow; nothing else), plus what a schema cannot say: input
ids present and unique across a card, its version, and the size Teams allows a message.

`card_problems(card)` answers as Teams does when it refuses a card ("invalid card"), one line
per problem.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

#: What a card may take of a Teams message (28 KB in all, the activity around it included).
MESSAGE_BYTES = 28 * 1024

_SPACING = {"enum": ["None", "Small", "Default", "Medium", "Large", "ExtraLarge", "Padding"]}
_COLOR = {"enum": ["Default", "Dark", "Light", "Accent", "Good", "Warning", "Attention"]}
_SIZE = {"enum": ["Default", "Small", "Medium", "Large", "ExtraLarge"]}
_WEIGHT = {"enum": ["Default", "Lighter", "Bolder"]}
_ALIGN = {"enum": ["Left", "Center", "Right"]}
_ELEMENT = {
    "id": {"type": "string"},
    "spacing": _SPACING,
    "separator": {"type": "boolean"},
    "height": {"enum": ["auto", "stretch"]},
    "isVisible": {"type": "boolean"},
}
_INPUT = {
    **_ELEMENT,
    "id": {"type": "string", "minLength": 1},
    "label": {"type": "string"},
    "isRequired": {"type": "boolean"},
    "errorMessage": {"type": "string"},
}
_ACTION = {
    "title": {"type": "string"},
    "id": {"type": "string"},
    "style": {"enum": ["default", "positive", "destructive"]},
    "mode": {"enum": ["primary", "secondary"]},
    "tooltip": {"type": "string"},
    "isEnabled": {"type": "boolean"},
}


def _strict(kind: str, props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"type": {"const": kind}, **props},
        "required": ["type", *required],
        "additionalProperties": False,
    }


SCHEMA: dict[str, Any] = {
    "$ref": "#/$defs/AdaptiveCard",
    "$defs": {
        "AdaptiveCard": _strict(
            "AdaptiveCard",
            {
                "$schema": {"type": "string"},
                "version": {"const": "1.5"},
                "body": {"type": "array", "items": {"$ref": "#/$defs/Element"}},
                "actions": {"type": "array", "items": {"$ref": "#/$defs/Action"}},
                "refresh": {
                    "type": "object",
                    "properties": {
                        "action": {"$ref": "#/$defs/Action.Execute"},
                        "userIds": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["action"],
                    "additionalProperties": False,
                },
                "fallbackText": {"type": "string"},
            },
            ("version",),
        ),
        "ShownCard": _strict(
            "AdaptiveCard",
            {
                "body": {"type": "array", "items": {"$ref": "#/$defs/Element"}},
                "actions": {"type": "array", "items": {"$ref": "#/$defs/Action"}},
            },
        ),
        "Element": {
            "oneOf": [
                {"$ref": "#/$defs/TextBlock"},
                {"$ref": "#/$defs/RichTextBlock"},
                {"$ref": "#/$defs/Input.Text"},
                {"$ref": "#/$defs/Input.Number"},
                {"$ref": "#/$defs/Input.Toggle"},
                {"$ref": "#/$defs/Input.ChoiceSet"},
            ]
        },
        "TextBlock": _strict(
            "TextBlock",
            {
                **_ELEMENT,
                "text": {"type": "string"},
                "color": _COLOR,
                "size": _SIZE,
                "weight": _WEIGHT,
                "isSubtle": {"type": "boolean"},
                "wrap": {"type": "boolean"},
                "maxLines": {"type": "integer", "minimum": 0},
                "horizontalAlignment": _ALIGN,
                "fontType": {"enum": ["Default", "Monospace"]},
                "style": {"enum": ["default", "heading"]},
            },
            ("text",),
        ),
        "TextRun": _strict(
            "TextRun",
            {
                "text": {"type": "string"},
                "color": _COLOR,
                "size": _SIZE,
                "weight": _WEIGHT,
                "isSubtle": {"type": "boolean"},
                "italic": {"type": "boolean"},
                "strikethrough": {"type": "boolean"},
                "underline": {"type": "boolean"},
                "highlight": {"type": "boolean"},
                "fontType": {"enum": ["Default", "Monospace"]},
            },
            ("text",),
        ),
        "RichTextBlock": _strict(
            "RichTextBlock",
            {
                **_ELEMENT,
                "inlines": {
                    "type": "array",
                    "items": {"oneOf": [{"$ref": "#/$defs/TextRun"}, {"type": "string"}]},
                },
                "horizontalAlignment": _ALIGN,
            },
            ("inlines",),
        ),
        "Input.Text": _strict(
            "Input.Text",
            {
                **_INPUT,
                "isMultiline": {"type": "boolean"},
                "maxLength": {"type": "number", "minimum": 0},
                "placeholder": {"type": "string"},
                "regex": {"type": "string"},
                "style": {"enum": ["text", "tel", "url", "email", "password"]},
                "value": {"type": "string"},
            },
            ("id",),
        ),
        "Input.Number": _strict(
            "Input.Number",
            {
                **_INPUT,
                "min": {"type": "number"},
                "max": {"type": "number"},
                "placeholder": {"type": "string"},
                "value": {"type": "number"},
            },
            ("id",),
        ),
        "Input.Toggle": _strict(
            "Input.Toggle",
            {
                **_INPUT,
                "title": {"type": "string"},
                "value": {"type": "string"},
                "valueOn": {"type": "string"},
                "valueOff": {"type": "string"},
                "wrap": {"type": "boolean"},
            },
            ("id", "title"),
        ),
        "Input.ChoiceSet": _strict(
            "Input.ChoiceSet",
            {
                **_INPUT,
                "choices": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"title": {"type": "string"}, "value": {"type": "string"}},
                        "required": ["title", "value"],
                        "additionalProperties": False,
                    },
                },
                "isMultiSelect": {"type": "boolean"},
                "style": {"enum": ["compact", "expanded", "filtered"]},
                "value": {"type": "string"},
                "placeholder": {"type": "string"},
                "wrap": {"type": "boolean"},
            },
            ("id",),
        ),
        "Action": {
            "oneOf": [
                {"$ref": "#/$defs/Action.Execute"},
                {"$ref": "#/$defs/Action.Submit"},
                {"$ref": "#/$defs/Action.ShowCard"},
                {"$ref": "#/$defs/Action.OpenUrl"},
            ]
        },
        "Action.Execute": _strict(
            "Action.Execute",
            {
                **_ACTION,
                "verb": {"type": "string"},
                "data": {"type": ["string", "object"]},
                "associatedInputs": {"enum": ["Auto", "None"]},
            },
        ),
        "Action.Submit": _strict(
            "Action.Submit",
            {
                **_ACTION,
                "data": {"type": ["string", "object"]},
                "associatedInputs": {"enum": ["Auto", "None"]},
            },
        ),
        "Action.ShowCard": _strict(
            "Action.ShowCard", {**_ACTION, "card": {"$ref": "#/$defs/ShownCard"}}
        ),
        "Action.OpenUrl": _strict(
            "Action.OpenUrl",
            {**_ACTION, "url": {"type": "string", "pattern": "^https?://[^\\s]+$"}},
            ("url",),
        ),
    },
}

_VALIDATOR = Draft202012Validator(SCHEMA)


def _ids(node: Any, found: list[str]) -> None:
    if isinstance(node, dict):
        if str(node.get("type", "")).startswith("Input.") and "id" in node:
            found.append(str(node["id"]))
        for value in node.values():
            _ids(value, found)
    elif isinstance(node, list):
        for value in node:
            _ids(value, found)


def card_problems(card: Any) -> list[str]:
    """What Teams would refuse in `card` (empty: nothing)."""
    problems = []
    for error in _VALIDATOR.iter_errors(card):
        where = "/".join(str(p) for p in error.absolute_path) or "(card)"
        problems.append(f"{where}: {error.message[:200]}")
    ids: list[str] = []
    _ids(card, ids)
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        problems.append(f"input ids used twice: {twice}")
    size = len(json.dumps(card).encode())
    if size > MESSAGE_BYTES - 2048:
        problems.append(f"a card of {size} bytes (a Teams message holds 28 KB)")
    return problems
