"""Block Kit for inbox items: the message a run's item becomes, and the modals to edit or reject.

Pure functions from the engine's nouns to Slack's JSON and back (the submitted view state to
form values), so every layout rule is testable without Slack. Edit forms come from
`agent.argforms`, the same translation the web page and email use.

Slack's limits shape some choices here: a section holds 3,000 characters, a text input 3,000,
a select 100 options of at most 150 characters, a modal 100 blocks, a `block_id` 255 characters
and unique in its view. What does not fit is cut with a link to the item's web page instead of
being sent and refused. A tool's schema is the model's or a server's text, so an input's
`block_id` is the field's index in the form (reversed on submit against the same field list,
whose digest rides in `private_metadata`), never its name; and a value Slack cannot show (a
number like `1e999`) is not prefilled.

Everything the model, a tool or a skill wrote is escaped before it reaches mrkdwn, the
top-level `text` included (Slack reads `<!channel>`, `<@U…>` and `<url|label>` there too).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from agent.argforms import Field, coerce_form, field_path, form_fields
from agent.model import MAY_HAVE_HAPPENED, Box, Item, ItemKind, ItemStatus, Run, RunStatus

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
    "buttons",
    "decided_text",
    "edit_modal",
    "esc",
    "field_block",
    "fields_digest",
    "form_errors",
    "form_values",
    "item_url",
    "message",
    "note_outcome",
    "outcome_mark",
    "reason_value",
    "reject_modal",
    "run_url",
    "submitted_args",
]

#: action_id of the buttons and callback_id of the modals: what the Bolt listeners match.
APPROVE = "pizza_approve"
EDIT = "pizza_edit"
REJECT = "pizza_reject"
#: The card's "Approve, and don't ask again" menu, and a grant listing's Revoke button.
GRANT = "pizza_grant"
REVOKE_GRANT = "pizza_revoke_grant"
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
_NUMBER_MAX = 30  # digits Slack is sure to show in a number_input; longer numbers are typed
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_SLACK_USER = re.compile(r"[UW][A-Z0-9]+")


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
    #: The digest of the edit form's field names: the block ids are indexes into that list.
    fields: str | None = None

    def dumps(self) -> str:
        data = {"item": self.item_id, "channel": self.channel, "thread": self.thread_ts}
        if self.fields:
            data["fields"] = self.fields
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

        return cls(get("item") or "", get("channel"), get("thread"), get("fields"))


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
    if via == "slack" and _SLACK_USER.fullmatch(name):
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
    if risk.may_have_happened:
        parts.append(f"*{MAY_HAVE_HAPPENED}*")
    if risk.impact:
        parts.append(f"impact *{esc(risk.impact)}*")
    if risk.reversible is not None:
        parts.append("reversible" if risk.reversible else "*not reversible*")
    if risk.scope:
        parts.append(f"scope *{esc(risk.scope)}*")
    if risk.hints:
        # The tool server's own annotations, shown only where the skill gives no notes.
        parts.append(f"the tool says _{esc(', '.join(risk.hints))}_ (not checked)")
    return "⚠️ Risk: " + " · ".join(parts) if parts else None


# --- messages ---------------------------------------------------------------------------


def message(item: Item, *, base_url: str, outcome: RunStatus | None = None) -> Message:
    """The message for `item` in its current state: with buttons while it waits for a
    decision, with the outcome afterwards, or the run's result for an Unread item, whose
    `outcome` (see `note_outcome`) picks its mark."""
    if item.box is Box.UNREAD:
        return _unread(item, base_url, outcome)
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
    if item.risk.rule:
        blocks.append(_context(f"📏 Asked by {esc(item.risk.rule)}"))
    if item.risk.approvals_text:
        blocks.append(_context(f"👥 {esc(item.risk.approvals_text)}"))
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
        blocks.append(buttons(item))
    blocks.append(_context(_link(url, "Open on the web page")))
    return Message(text=esc(_cut(item.title, 300)), blocks=blocks)


_STATUS_WORD = {
    ItemStatus.APPROVED: "approved",
    ItemStatus.EDITED: "edited and approved",
    ItemStatus.REJECTED: "rejected",
    ItemStatus.EXPIRED: "expired",
    ItemStatus.CANCELLED: "closed",
}


def buttons(item: Item) -> dict[str, Any]:
    """Approve, Edit (tool calls only) and Reject: one row, the same on a card and in Home."""
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
    if not budget and item.risk.grants:
        elements.append(grant_menu(item))
    # A new block_id per item: Slack asks for a fresh one whenever a message's blocks change.
    return {"type": "actions", "block_id": f"decide:{item.id}", "elements": elements}


def grant_label(choice: str) -> str:
    """A grant as a person chooses it ("Approve for this run")."""
    if choice == "run":
        return "Approve for this run"
    if choice == "exact":
        return "Approve for these exact arguments"
    return f"Approve for {choice}"


def grant_menu(item: Item) -> dict[str, Any]:
    """ "Approve, and don't ask again": one option per grant the card offers; each option's
    value is "ITEM:GRANT"."""
    return {
        "type": "overflow",
        "action_id": GRANT,
        "options": [_option(f"{item.id}:{g}", grant_label(g)) for g in item.risk.grants],
    }


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


def note_outcome(item: Item, run: Run) -> RunStatus | None:
    """How `run` had ended when `item`, its Unread note, was written; None when it has not
    ended, or has gone on since (a follow-up queued it again, and it may have ended anew)."""
    # The note and the run's end are written in one transaction with one clock reading.
    if run.status.terminal and run.finished_at == item.created_at:
        return run.status
    return None


def outcome_mark(outcome: RunStatus | None) -> str:
    """✅ for a run that finished, ⚠️ for one that failed or was stopped, ℹ️ when unknown."""
    if outcome is None:
        return "ℹ️"
    return "✅" if outcome is RunStatus.DONE else "⚠️"


def _unread(item: Item, base_url: str, outcome: RunStatus | None) -> Message:
    result = item.body or "(no result text)"
    cut = len(result) > _RESULT_CUT
    url = run_url(base_url, item.run_id)
    text = esc(_cut(result, _RESULT_CUT))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": _plain(f"{outcome_mark(outcome)} {item.title}")},
        _section(text),
        _context(
            _link(url, "Open the run on the web page")
            + (" (the result is cut here)" if cut else "")
        ),
    ]
    return Message(text=esc(_cut(f"{item.title}: {result}", 300)), blocks=blocks)


# --- modals -----------------------------------------------------------------------------


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
    if (
        _numeric(field)
        and isinstance(field.value, str)
        and _number_text(field.value, integer=field.kind == "integer") is None
    ):
        parts.append(f"The proposed value {_cut(field.value, 40)} cannot be shown here")
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


def _input(index: int, field: Field) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": field_block(index),
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
    ref = replace(ref, fields=fields_digest(fields))
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
    for index, field in enumerate(fields):
        if _too_long(field):
            blocks.append(
                _context(
                    f"*{esc(field.label)}* is too long to edit in Slack and is kept as it is: "
                    + _link(url, "edit it on the web page")
                )
            )
        else:
            blocks.append(_input(index, field))
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
    return {k: _cut(v, 2000) for k, v in out.items()}
