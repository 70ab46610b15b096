"""Block Kit for the modals to edit or reject an action, and the submitted view state back to
form values.

Edit forms come from `pizzabot.agent.argforms`, the same translation the web page and email use.
Slack's limits shape some choices here: a text input holds 3,000 characters, a select 100
options of at most 150 characters, a modal 100 blocks, a `block_id` 255 characters and unique
in its view. What does not fit is left to the item's web page instead of being sent and
refused. A tool's schema is the model's or a server's text, so an input's `block_id` is the
field's index in the form (reversed on submit against the same field list, whose digest rides
in `private_metadata`), never its name; and a value Slack cannot show (a number like `1e999`)
is not prefilled.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from pizzabot.agent.argforms import Field, chosen, coerce_form, field_path, form_fields
from pizzabot.agent.model import Item, ItemKind
from pizzabot.channels.slack.formats import FORMAT_INPUTS, format_element, format_value
from pizzabot.channels.slack.mrkdwn import (
    args_label,
    args_text,
    asked_text,
    clip,
    context,
    esc,
    item_url,
    link,
    option,
    plain,
    section,
)

__all__ = [
    "EDIT_VIEW",
    "EDIT_WORDS",
    "REASON_BLOCK",
    "REJECT_VIEW",
    "FormWords",
    "ModalRef",
    "edit_modal",
    "field_block",
    "fields_digest",
    "form_errors",
    "form_modal",
    "form_values",
    "reason_modal",
    "reason_value",
    "reject_modal",
    "submitted_args",
]

#: callback_id of the modals: what the Bolt listeners match.
EDIT_VIEW = "pizza_edit_view"
REJECT_VIEW = "pizza_reject_view"

REASON_BLOCK = "reason"
_FIELD_PREFIX = "arg:"
_ACTION = "value"
_NONE_OPTION = "pizza:none"  # the "no value" choice of an optional select

_INPUT_MAX = 3000
_MODAL_BLOCKS = 100
_SELECT_OPTIONS = 100
_OPTION_VALUE_MAX = 150
_REASON_VALUE_CUT = 200  # a value longer than this is cut in the reject modal
_NUMBER_MAX = 30  # digits Slack is sure to show in a number_input; longer numbers are typed
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")


@dataclass(frozen=True)
class ModalRef:
    """What a modal carries in `private_metadata`: the item, and where its message is, so a
    refusal after the modal closes can be shown next to the message."""

    item_id: str
    channel: str | None = None
    thread_ts: str | None = None
    #: The digest of the edit form's field names: the block ids are indexes into that list.
    fields: str | None = None
    #: The digest of the item as the modal showed it (`pizzabot.agent.card_digest`).
    seen: str | None = None

    def dumps(self) -> str:
        data = {"item": self.item_id, "channel": self.channel, "thread": self.thread_ts}
        if self.fields:
            data["fields"] = self.fields
        if self.seen:
            data["seen"] = self.seen
        return json.dumps(data)

    @classmethod
    def loads(cls, text: str) -> ModalRef:
        try:
            data = json.loads(text or "{}")
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}

        def get(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        return cls(get("item") or "", get("channel"), get("thread"), get("fields"), get("seen"))


def field_block(index: int) -> str:
    """The `block_id` of the edit form's `index`-th field: short, unique in the view, and
    reversible against the same field list, whatever the argument is called."""
    return f"{_FIELD_PREFIX}{index}"


def fields_digest(fields: Sequence[Field]) -> str:
    """Names the field list a modal was built from, so its indexes are read against the same."""
    names = json.dumps([f.name for f in fields], ensure_ascii=False)
    return hashlib.sha256(names.encode()).hexdigest()[:16]


def _too_long(field: Field) -> bool:
    return isinstance(field.value, str) and len(field.value) > _INPUT_MAX


def _number_text(value: str | bool | None, *, integer: bool) -> str | None:
    """`value` as Slack's number_input shows it (plain digits), or None when it cannot: not a
    number, infinite (a model's `1e999`), a fraction for an integer, or too many digits."""
    if not isinstance(value, str):
        return None
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        return None
    if not number.is_finite() or number.adjusted() >= _NUMBER_MAX:
        return None
    if integer and number != number.to_integral_value():
        return None
    text = value.strip() if _PLAIN_NUMBER.fullmatch(value.strip()) else format(number, "f")
    ok = _PLAIN_NUMBER.fullmatch(text) and len(text) <= _NUMBER_MAX
    return text if ok and math.isfinite(float(text)) else None


def _numeric(field: Field) -> bool:
    return field.kind in {"number", "integer"}


def _hint(field: Field) -> str | None:
    parts: list[str] = []
    if field.description:
        parts.append(field.description)
    if field.minimum is not None or field.maximum is not None:
        low = "" if field.minimum is None else f"from {field.minimum:g} "
        high = "" if field.maximum is None else f"to {field.maximum:g}"
        parts.append(f"A number {low}{high}".strip())
    if field.max_length is not None:
        parts.append(f"At most {field.max_length} characters")
    if field.kind == "json":
        parts.append("JSON")
    if field.kind == "multiselect" and not _selectable(field):
        parts.append("Choices separated by commas: " + ", ".join(field.options))
    if (
        _numeric(field)
        and isinstance(field.value, str)
        and _number_text(field.value, integer=field.kind == "integer") is None
    ):
        parts.append(f"The proposed value {clip(field.value, 40)} cannot be shown here")
    return clip(". ".join(parts), 2000) if parts else None


def _selectable(field: Field) -> bool:
    return len(field.options) + 1 <= _SELECT_OPTIONS and all(
        0 < len(o) <= _OPTION_VALUE_MAX for o in field.options
    )


def _choice_element(field: Field) -> dict[str, Any]:
    """A select (one choice, with "no value" where none is allowed) or a multi-select,
    each option reading as the schema titles it and submitting its own text."""
    labels = dict(field.labelled_options())
    options = [option(o, labels.get(o)) for o in field.options]
    if field.kind == "multiselect":
        element: dict[str, Any] = {
            "type": "multi_static_select",
            "action_id": _ACTION,
            "options": options,
        }
        picked = [option(o, labels.get(o)) for o in chosen(field)]
        if picked:
            element["initial_options"] = picked
        return element
    if not field.required or field.nullable:
        options.append(option(_NONE_OPTION, "(no value)"))
    element = {"type": "static_select", "action_id": _ACTION, "options": options}
    if isinstance(field.value, str) and field.value in field.options:
        element["initial_option"] = option(field.value, labels.get(field.value))
    return element


def _element(field: Field) -> dict[str, Any]:
    value = field.value
    if field.kind == "checkbox":
        box = option("true", "Yes")
        element: dict[str, Any] = {"type": "checkboxes", "action_id": _ACTION, "options": [box]}
        if value is True:
            element["initial_options"] = [box]
        return element
    if _numeric(field):
        # No min/max on the element: Slack refuses a view whose initial value is out of range,
        # and a model may propose one. The range is in the hint and checked on submit.
        element = {
            "type": "number_input",
            "action_id": _ACTION,
            "is_decimal_allowed": field.kind == "number",
        }
        shown = _number_text(value, integer=field.kind == "integer")
        if shown is not None:
            element["initial_value"] = shown
        return element
    if field.kind in {"select", "multiselect"} and _selectable(field):
        return _choice_element(field)
    if field.kind == "text" and field.format:
        special = format_element(field, _ACTION)
        if special is not None:
            return special
    element = {"type": "plain_text_input", "action_id": _ACTION}
    if field.kind in {"textarea", "json"} or (isinstance(value, str) and "\n" in value):
        element["multiline"] = True
    if isinstance(value, str) and value:
        element["initial_value"] = value
    return element


def _input(index: int, field: Field) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": field_block(index),
        "label": plain(field.label, 2000),
        "element": _element(field),
        # A checkbox left empty means false, so it can never be "required" the Slack way.
        "optional": field.kind == "checkbox" or not field.required,
    }
    hint = _hint(field)
    if hint:
        block["hint"] = plain(hint, 2000)
    return block


@dataclass(frozen=True)
class FormWords:
    """What a form modal says: an edit of a tool call's arguments, or an answer to a question."""

    title: str
    submit: str
    #: Where Slack cannot show the form: why, and the link's words.
    too_many: str
    nothing: str
    on_the_web: str


EDIT_WORDS = FormWords(
    title="Edit arguments",
    submit="Run with these",
    too_many="This tool has too many arguments for a Slack form.",
    nothing="Nothing here can be edited in a Slack form.",
    on_the_web="Edit it on the web page",
)


def edit_modal(item: Item, *, ref: ModalRef, base_url: str) -> dict[str, Any]:
    """The edit form for an action: one input per argument, prefilled with the proposal."""
    fields = form_fields(item.schema or {}, item.args or {})
    url = item_url(base_url, item)
    tool, server = item.tool_place
    on = f" on `{esc(server)}`" if server else ""
    intro = [
        context(
            f"Change the arguments of `{esc(tool)}`{on}, then run it. "
            f"Required fields are marked. {link(url, 'Open on the web page')}"
        )
    ]
    asked = asked_text(item)
    if asked:
        intro.append(context("\n".join(asked)))
    return form_modal(item, ref=ref, url=url, fields=fields, intro=intro, words=EDIT_WORDS)


def form_modal(
    item: Item,
    *,
    ref: ModalRef,
    url: str,
    fields: Sequence[Field],
    intro: Sequence[dict[str, Any]],
    words: FormWords,
) -> dict[str, Any]:
    """A modal with one input per field after `intro`, submitted to `EDIT_VIEW`; the item's
    web page instead where Slack cannot hold the form."""
    ref = replace(ref, fields=fields_digest(fields))
    blocks: list[dict[str, Any]] = list(intro)
    if len(fields) + len(blocks) > _MODAL_BLOCKS:
        return _web_only_modal(ref, url, words.too_many, words)
    for index, field in enumerate(fields):
        if _too_long(field):
            blocks.append(
                context(
                    f"*{esc(field.label)}* is too long to edit in Slack and is kept as it is: "
                    + link(url, "edit it on the web page")
                )
            )
        else:
            blocks.append(_input(index, field))
    if not any(b["type"] == "input" for b in blocks):
        return _web_only_modal(ref, url, words.nothing, words)
    return {
        "type": "modal",
        "callback_id": EDIT_VIEW,
        "title": plain(words.title, 24),
        "submit": plain(words.submit, 24),
        "close": plain("Cancel", 24),
        "private_metadata": ref.dumps(),
        "blocks": blocks,
    }


def _web_only_modal(ref: ModalRef, url: str, why: str, words: FormWords) -> dict[str, Any]:
    return {
        "type": "modal",
        "title": plain(words.title, 24),
        "close": plain("Close", 24),
        "private_metadata": ref.dumps(),
        "blocks": [section(f"{esc(why)} {link(url, words.on_the_web)}.")],
    }


def reject_modal(item: Item, *, ref: ModalRef) -> dict[str, Any]:
    """Ask for an optional reason: the agent reads it and can change course."""
    return reason_modal(item, ref=ref, verb="Reject", label="Why? The agent reads this")


def reason_modal(item: Item, *, ref: ModalRef, verb: str, label: str) -> dict[str, Any]:
    """A modal that `verb`s the item (submitted to `REJECT_VIEW`) with an optional reason
    asked for by `label`. It shows what its digest binds: the arguments (long ones cut
    short: the web page has them whole), who asked and the rule that asked."""
    shown = [section(f"*{esc(clip(item.title, 300))}*")]
    if item.args or item.kind is ItemKind.TOOL:
        args = args_text(item.args, more_url=None, value_cut=_REASON_VALUE_CUT)
        shown.append(section(f"*{args_label(item)}*\n{args}"))
    asked = asked_text(item)
    if asked:
        shown.append(context("\n".join(asked)))
    return {
        "type": "modal",
        "callback_id": REJECT_VIEW,
        "title": plain(verb, 24),
        "submit": plain(verb, 24),
        "close": plain("Cancel", 24),
        "private_metadata": ref.dumps(),
        "blocks": [
            *shown,
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": plain(label, 2000),
                "element": {"type": "plain_text_input", "action_id": _ACTION, "multiline": True},
            },
        ],
    }


def reason_value(state_values: Mapping[str, Any]) -> str:
    entry = state_values.get(REASON_BLOCK, {}).get(_ACTION, {})
    return str(entry.get("value") or "").strip()


def form_values(
    state_values: Mapping[str, Any], fields: Sequence[Field]
) -> dict[str, str | bool | None]:
    """The raw form values (for `pizzabot.agent.argforms.coerce_form`) from a submitted view's
    `state.values`. Fields Slack could not show keep their proposed value."""
    raw: dict[str, str | bool | None] = {}
    for index, field in enumerate(fields):
        if _too_long(field):
            raw[field.name] = field.value
            continue
        entry = state_values.get(field_block(index), {}).get(_ACTION)
        if not isinstance(entry, Mapping):
            raw[field.name] = False if field.kind == "checkbox" else None
            continue
        kind = entry.get("type")
        if kind == "checkboxes":
            raw[field.name] = bool(entry.get("selected_options"))
        elif kind in {"static_select", "radio_buttons"}:
            selected = entry.get("selected_option")
            value = selected.get("value") if isinstance(selected, Mapping) else None
            raw[field.name] = None if value in (None, _NONE_OPTION) else str(value)
        elif kind == "multi_static_select":
            picked = entry.get("selected_options") or []
            texts = [o.get("value") for o in picked if isinstance(o, Mapping)]
            raw[field.name] = (
                json.dumps([str(t) for t in texts if t is not None]) if texts else None
            )
        elif kind in FORMAT_INPUTS:
            raw[field.name] = format_value(entry)
        else:
            value = entry.get("value")
            raw[field.name] = None if value is None else str(value)
    return raw


def submitted_args(
    schema: Mapping[str, Any], fields: Sequence[Field], state_values: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Typed arguments and errors (by field name) from a submitted edit modal."""
    return coerce_form(schema, form_values(state_values, fields))


def form_errors(errors: Mapping[str, str], fields: Sequence[Field]) -> dict[str, str]:
    """`coerce_form` errors keyed by the modal's block ids, as `response_action: errors`
    wants them. An error about no field shown goes to the first input, naming its field."""
    inputs = [(i, f.name) for i, f in enumerate(fields) if not _too_long(f)]
    out: dict[str, str] = {}
    for name, text in errors.items():
        # An error about an object (a member missing) goes to the first of its members.
        path = field_path(name)
        target = next(
            (i for i, n in inputs if n == name),
            next((i for i, n in inputs if name and field_path(n)[: len(path)] == path), None),
        )
        if target is None:
            target = inputs[0][0] if inputs else 0
            if name:
                text = f"{name}: {text}"
        block = field_block(target)
        out[block] = f"{out[block]}; {text}" if block in out else text
    return {k: clip(v, 2000) for k, v in out.items()}
