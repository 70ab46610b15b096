"""Block Kit for inbox items: the message a run's item becomes, and the modals to edit or reject.

Pure functions from the engine's nouns to Slack's JSON and back (the submitted view state to
form values), so every layout rule is testable without Slack. Edit forms come from
`agent.argforms`, the same translation the web page and email use.

Slack's limits shape some choices here: a section holds 3,000 characters, a text input 3,000,
a select 100 options of at most 150 characters, a modal 100 blocks. What does not fit is cut
with a link to the item's web page instead of being sent and refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent.argforms import Field, form_fields
from agent.model import Box, Item, ItemKind, ItemStatus

__all__ = [
    "APPROVE",
    "EDIT",
    "EDIT_VIEW",
    "REJECT",
    "REJECT_VIEW",
    "Message",
    "ModalRef",
    "already_text",
    "args_text",
    "decided_text",
    "edit_modal",
    "esc",
    "form_errors",
    "form_values",
    "item_url",
    "message",
    "reason_value",
    "reject_modal",
    "run_url",
]

#: action_id of the buttons and callback_id of the modals: what the Bolt listeners match.
APPROVE = "pizza_approve"
EDIT = "pizza_edit"
REJECT = "pizza_reject"
EDIT_VIEW = "pizza_edit_view"
REJECT_VIEW = "pizza_reject_view"

REASON_BLOCK = "reason"
_FIELD_PREFIX = "arg:"
_ACTION = "value"
_NONE_OPTION = "pizza:none"  # the "no value" choice of an optional select

_SECTION_MAX = 3000
_INPUT_MAX = 3000
_VALUE_CUT = 280  # a proposed value longer than this is cut in the message
_ARGS_BUDGET = 2600  # characters of arguments in one message, before the link takes over
_BODY_CUT = 1500
_RESULT_CUT = 2800
_MODAL_BLOCKS = 100
_SELECT_OPTIONS = 100
_OPTION_VALUE_MAX = 150
_OPTION_TEXT_MAX = 75


@dataclass(frozen=True)
class Message:
    """A Slack message: `text` is the notification and fallback, `blocks` what people see."""

    text: str
    blocks: list[dict[str, Any]]


@dataclass(frozen=True)
class ModalRef:
    """What a modal carries in `private_metadata`: the item, and where its message is, so a
    refusal after the modal closes can be shown next to the message."""

    item_id: str
    channel: str | None = None
    thread_ts: str | None = None

    def dumps(self) -> str:
        return json.dumps({"item": self.item_id, "channel": self.channel, "thread": self.thread_ts})

    @classmethod
    def loads(cls, text: str) -> ModalRef:
        data = json.loads(text or "{}")
        return cls(str(data.get("item", "")), data.get("channel"), data.get("thread"))


# --- small helpers ----------------------------------------------------------------------


def esc(text: str) -> str:
    """Escape what Slack's mrkdwn reads as markup (its three control characters)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _plain(text: str, limit: int = 150) -> dict[str, Any]:
    return {"type": "plain_text", "text": _cut(text, limit) or " ", "emoji": True}


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text[:_SECTION_MAX] or " "}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_mrkdwn(text)]}


def _link(url: str, label: str) -> str:
    return f"<{url}|{esc(label)}>"


def item_url(base_url: str, item: Item) -> str:
    return f"{base_url.rstrip('/')}/items/{item.id}"


def run_url(base_url: str, run_id: str) -> str:
    return f"{base_url.rstrip('/')}/runs/{run_id}"


def who(name: str | None, via: str | None) -> str:
    """A decider as Slack shows them: Slack users as mentions, anyone else by name."""
    if not name:
        return "someone"
    if via == "slack":
        return f"<@{name}>"
    return esc(name)


def when(at: datetime | None) -> str:
    """A time every reader sees in their own time zone (Slack's date formatting)."""
    if at is None:
        return "earlier"
    fallback = at.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def args_text(args: Mapping[str, Any] | None, *, more_url: str) -> str:
    """Arguments one per line, readable; long values and long lists cut with a link."""
    if not args:
        return "_(no arguments)_"
    lines: list[str] = []
    used = 0
    for key, value in args.items():
        shown = _render_value(value)
        cut = len(shown) > _VALUE_CUT
        if cut:
            shown = shown[:_VALUE_CUT] + "…"
        line = f"*{esc(str(key))}*: {esc(shown)}"
        if cut:
            line += f" {_link(more_url, 'see all')}"
        if used + len(line) > _ARGS_BUDGET:
            lines.append(f"… {_link(more_url, 'more arguments on the web page')}")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _risk_text(item: Item) -> str | None:
    risk = item.risk
    parts: list[str] = []
    if risk.impact:
        parts.append(f"impact *{esc(risk.impact)}*")
    if risk.reversible is not None:
        parts.append("reversible" if risk.reversible else "*not reversible*")
    if risk.scope:
        parts.append(f"scope *{esc(risk.scope)}*")
    return "⚠️ Risk: " + " · ".join(parts) if parts else None


# --- messages ---------------------------------------------------------------------------


def message(item: Item, *, base_url: str) -> Message:
    """The message for `item` in its current state: with buttons while it waits for a
    decision, with the outcome afterwards, or the run's result for an Unread item."""
    if item.box is Box.UNREAD:
        return _unread(item, base_url)
    return _action(item, base_url)


def _action(item: Item, base_url: str) -> Message:
    url = item_url(base_url, item)
    budget = item.kind is ItemKind.BUDGET
    heading = "budget reached" if budget else "approval needed"
    if item.decided:
        heading = _STATUS_WORD.get(item.status, str(item.status))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(f"{item.skill}: {heading}")},
        _section(f"*{esc(item.title)}*\n{esc(_cut(item.body, _BODY_CUT))}"),
    ]
    if item.tool:
        server, _, tool = item.tool.partition(".")
        blocks.append(_context(f"🔧 Tool `{esc(tool or server)}` on server `{esc(server)}`"))
    risk = _risk_text(item)
    if risk:
        blocks.append(_context(risk))
    if item.status is ItemStatus.EDITED:
        label = "Edited arguments"
        shown = item.final_args
    else:
        label = "Extension" if budget else "Proposed arguments"
        shown = item.args
    blocks.append(_section(f"*{label}*\n{args_text(shown, more_url=url)}"))
    if item.decided:
        blocks.append(_section(decided_text(item)))
    else:
        blocks.append(_buttons(item))
    blocks.append(_context(_link(url, "Open on the web page")))
    return Message(text=_cut(f"{item.title}", 300), blocks=blocks)


_STATUS_WORD = {
    ItemStatus.APPROVED: "approved",
    ItemStatus.EDITED: "edited and approved",
    ItemStatus.REJECTED: "rejected",
    ItemStatus.EXPIRED: "expired",
    ItemStatus.CANCELLED: "closed",
}


def _buttons(item: Item) -> dict[str, Any]:
    budget = item.kind is ItemKind.BUDGET
    approve: dict[str, Any] = {
        "type": "button",
        "action_id": APPROVE,
        "text": _plain("Extend" if budget else "Approve"),
        "style": "primary",
        "value": item.id,
    }
    reject: dict[str, Any] = {
        "type": "button",
        "action_id": REJECT,
        "text": _plain("Stop the run" if budget else "Reject"),
        "style": "danger",
        "value": item.id,
        "confirm": {
            "title": _plain("Stop the run?" if budget else "Reject this call?"),
            "text": _mrkdwn(
                "The run stops here."
                if budget
                else "The tool will not run; you can tell the agent why on the next screen."
            ),
            "confirm": _plain("Stop" if budget else "Reject"),
            "deny": _plain("Cancel"),
            "style": "danger",
        },
    }
    elements = [approve]
    if not budget:
        elements.append(
            {"type": "button", "action_id": EDIT, "text": _plain("Edit"), "value": item.id}
        )
    elements.append(reject)
    # A new block_id per item: Slack asks for a fresh one whenever a message's blocks change.
    return {"type": "actions", "block_id": f"decide:{item.id}", "elements": elements}


def decided_text(item: Item) -> str:
    """One line saying how an action ended: who, through which channel, when, and why."""
    by, via, at = who(item.decided_by, item.decided_via), item.decided_via, when(item.decided_at)
    budget = item.kind is ItemKind.BUDGET
    match item.status:
        case ItemStatus.APPROVED:
            verb = "Budget extended" if budget else "Approved"
            return f"✅ {verb} by {by} via {esc(via or '?')} at {at}"
        case ItemStatus.EDITED:
            return (
                f"✏️ Edited by {by} via {esc(via or '?')} at {at}: it ran with the arguments above"
            )
        case ItemStatus.REJECTED:
            verb = "Run stopped" if budget else "Rejected"
            line = f"❌ {verb} by {by} via {esc(via or '?')} at {at}"
            return line + (f": {esc(item.reason)}" if item.reason else "")
        case ItemStatus.EXPIRED:
            line = f"⌛ Expired at {at}: nobody decided in time"
            return line + (f" ({esc(item.reason)})" if item.reason else "")
        case ItemStatus.CANCELLED:
            return f"🚫 Closed: the run ended at {at} before anyone decided"
        case _:
            return f"{esc(str(item.status))} at {at}"


def already_text(item: Item, *, plain: bool = False) -> str:
    """What a stale click is told; `plain` for places that show no mrkdwn (form errors)."""
    at = item.decided_at.strftime("%Y-%m-%d %H:%M UTC") if plain and item.decided_at else None
    at = at or when(item.decided_at)
    if item.status is ItemStatus.CANCELLED:
        return "This item is closed: the run ended before anyone decided."
    if item.status is ItemStatus.EXPIRED:
        return f"This item expired at {at}: nobody decided in time."
    word = _STATUS_WORD.get(item.status, str(item.status))
    by = (item.decided_by or "someone") if plain else who(item.decided_by, item.decided_via)
    via = item.decided_via or "?"
    return f"Already {word} by {by} via {via if plain else esc(via)} at {at}."


def _unread(item: Item, base_url: str) -> Message:
    ok = item.title.endswith("finished")
    result = item.body or "(no result text)"
    cut = len(result) > _RESULT_CUT
    url = run_url(base_url, item.run_id)
    text = esc(_cut(result, _RESULT_CUT))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(f"{'✅' if ok else '⚠️'} {item.title}")},
        _section(text),
        _context(
            _link(url, "Open the run on the web page")
            + (" (the result is cut here)" if cut else "")
        ),
    ]
    return Message(text=_cut(f"{item.title}: {result}", 300), blocks=blocks)


# --- modals -----------------------------------------------------------------------------


def _block_id(name: str) -> str:
    return _FIELD_PREFIX + name


def _too_long(field: Field) -> bool:
    return isinstance(field.value, str) and len(field.value) > _INPUT_MAX


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
    return _cut(". ".join(parts), 2000) if parts else None


def _option(value: str, label: str | None = None) -> dict[str, Any]:
    return {"text": _plain(label or value, _OPTION_TEXT_MAX), "value": value}


def _selectable(field: Field) -> bool:
    return len(field.options) + 1 <= _SELECT_OPTIONS and all(
        0 < len(o) <= _OPTION_VALUE_MAX for o in field.options
    )


def _element(field: Field) -> dict[str, Any]:
    value = field.value
    if field.kind == "checkbox":
        box = _option("true", "Yes")
        element: dict[str, Any] = {"type": "checkboxes", "action_id": _ACTION, "options": [box]}
        if value is True:
            element["initial_options"] = [box]
        return element
    if field.kind in {"number", "integer"}:
        # No min/max on the element: Slack refuses a view whose initial value is out of range,
        # and a model may propose one. The range is in the hint and checked on submit.
        element = {
            "type": "number_input",
            "action_id": _ACTION,
            "is_decimal_allowed": field.kind == "number",
        }
        if isinstance(value, str) and _numeric(value, integer=field.kind == "integer"):
            element["initial_value"] = value
        return element
    if field.kind == "select" and _selectable(field):
        options = [_option(o) for o in field.options]
        if not field.required or field.nullable:
            options.append(_option(_NONE_OPTION, "(no value)"))
        element = {"type": "static_select", "action_id": _ACTION, "options": options}
        if isinstance(value, str) and value in field.options:
            element["initial_option"] = _option(value)
        return element
    element = {"type": "plain_text_input", "action_id": _ACTION}
    if field.kind in {"textarea", "json"} or (isinstance(value, str) and "\n" in value):
        element["multiline"] = True
    if isinstance(value, str) and value:
        element["initial_value"] = value
    return element


def _numeric(text: str, *, integer: bool) -> bool:
    try:
        number = float(text)
    except ValueError:
        return False
    return number == number and (not integer or number.is_integer())  # NaN is no number


def _input(field: Field) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": _block_id(field.name),
        "label": _plain(field.label, 2000),
        "element": _element(field),
        # A checkbox left empty means false, so it can never be "required" the Slack way.
        "optional": field.kind == "checkbox" or not field.required,
    }
    hint = _hint(field)
    if hint:
        block["hint"] = _plain(hint, 2000)
    return block


def edit_modal(item: Item, *, ref: ModalRef, base_url: str) -> dict[str, Any]:
    """The edit form for an action: one input per argument, prefilled with the proposal."""
    fields = form_fields(item.schema or {}, item.args or {})
    url = item_url(base_url, item)
    server, _, tool = (item.tool or "").partition(".")
    blocks: list[dict[str, Any]] = [
        _context(
            f"Change the arguments of `{esc(tool or server)}` on `{esc(server)}`, then run it. "
            f"Required fields are marked. {_link(url, 'Open on the web page')}"
        )
    ]
    if len(fields) + 1 > _MODAL_BLOCKS:
        return _web_only_modal(item, ref, url, "This tool has too many arguments for a Slack form.")
    for field in fields:
        if _too_long(field):
            blocks.append(
                _context(
                    f"*{esc(field.label)}* is too long to edit in Slack and is kept as it is: "
                    + _link(url, "edit it on the web page")
                )
            )
        else:
            blocks.append(_input(field))
    if not any(b["type"] == "input" for b in blocks):
        return _web_only_modal(item, ref, url, "Nothing here can be edited in a Slack form.")
    return {
        "type": "modal",
        "callback_id": EDIT_VIEW,
        "title": _plain("Edit arguments", 24),
        "submit": _plain("Run with these", 24),
        "close": _plain("Cancel", 24),
        "private_metadata": ref.dumps(),
        "blocks": blocks,
    }


def _web_only_modal(item: Item, ref: ModalRef, url: str, why: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "title": _plain("Edit arguments", 24),
        "close": _plain("Close", 24),
        "private_metadata": ref.dumps(),
        "blocks": [_section(f"{esc(why)} {_link(url, 'Edit it on the web page')}.")],
    }


def reject_modal(item: Item, *, ref: ModalRef) -> dict[str, Any]:
    """Ask for an optional reason: the agent reads it and can change course."""
    return {
        "type": "modal",
        "callback_id": REJECT_VIEW,
        "title": _plain("Reject", 24),
        "submit": _plain("Reject", 24),
        "close": _plain("Cancel", 24),
        "private_metadata": ref.dumps(),
        "blocks": [
            _section(f"*{esc(item.title)}*"),
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": _plain("Why? The agent reads this", 2000),
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
    """The raw form values (for `agent.argforms.coerce_form`) from a submitted view's
    `state.values`. Fields that were too long for Slack keep their proposed value."""
    raw: dict[str, str | bool | None] = {}
    for field in fields:
        if _too_long(field):
            raw[field.name] = field.value
            continue
        entry = state_values.get(_block_id(field.name), {}).get(_ACTION)
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
        else:
            value = entry.get("value")
            raw[field.name] = None if value is None else str(value)
    return raw


def form_errors(errors: Mapping[str, str], fields: Sequence[Field]) -> dict[str, str]:
    """`coerce_form` errors keyed by the modal's block ids, as `response_action: errors`
    wants them. An error about no single field goes to the first input."""
    inputs = [f.name for f in fields if not _too_long(f)]
    out: dict[str, str] = {}
    for name, text in errors.items():
        target = next(
            (n for n in inputs if n == name),
            next((n for n in inputs if name and n.startswith(name + ".")), None),
        )
        if target is None:
            target = inputs[0] if inputs else ""
            if name:
                text = f"{name}: {text}"
        block = _block_id(target)
        out[block] = f"{out[block]}; {text}" if block in out else text
    return {k: _cut(v, 2000) for k, v in out.items()}
