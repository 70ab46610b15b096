"""Block Kit for an item's card: the message an action or an Unread note becomes in Slack,
its buttons, and the lines that say how it was decided.

Pure functions from the engine's nouns to Slack's JSON, so every layout rule is testable
without Slack. A section holds 3,000 characters: long arguments, bodies and results are cut
with a link to the item's web page instead of being sent and refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pizzabot.agent.card_digest import card_digest
from pizzabot.agent.model import MAY_HAVE_HAPPENED, Box, Item, ItemKind, ItemStatus, Run, RunStatus
from pizzabot.channels.slack.mrkdwn import (
    args_text,
    clip,
    context,
    esc,
    item_url,
    link,
    mrkdwn,
    option,
    plain,
    run_url,
    section,
    when,
    who,
)
from pizzabot.channels.slack.previews import preview_blocks
from pizzabot.channels.slack.questions import question_blocks, question_buttons
from pizzabot.channels.slack.undo import undo_blocks

__all__ = [
    "APPROVE",
    "EDIT",
    "GRANT",
    "REJECT",
    "REVOKE_GRANT",
    "Message",
    "already_text",
    "args_text",
    "buttons",
    "decided_text",
    "grant_label",
    "grant_menu",
    "message",
    "note_outcome",
    "outcome_mark",
]

#: action_id of the card's buttons: what the Bolt listeners match.
APPROVE = "pizza_approve"
EDIT = "pizza_edit"
REJECT = "pizza_reject"
#: The card's "Approve, and don't ask again" menu, and a grant listing's Revoke button.
GRANT = "pizza_grant"
REVOKE_GRANT = "pizza_revoke_grant"

_BODY_CUT = 1500
_RESULT_CUT = 2800

_STATUS_WORD = {
    ItemStatus.APPROVED: "approved",
    ItemStatus.EDITED: "edited and approved",
    ItemStatus.REJECTED: "rejected",
    ItemStatus.EXPIRED: "expired",
    ItemStatus.CANCELLED: "closed",
}


@dataclass(frozen=True)
class Message:
    """A Slack message: `text` is the notification and fallback, `blocks` what people see."""

    text: str
    blocks: list[dict[str, Any]]


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


def message(item: Item, *, base_url: str, outcome: RunStatus | None = None) -> Message:
    """The message for `item` in its current state: with buttons while it waits for a
    decision, with the outcome afterwards, or the run's result for an Unread item, whose
    `outcome` (see `note_outcome`) picks its mark."""
    if item.box is Box.UNREAD:
        return _unread(item, base_url, outcome)
    return _action(item, base_url)


def _action(item: Item, base_url: str) -> Message:
    if item.kind is ItemKind.QUESTION:
        return Message(
            text=esc(clip(item.title, 300)), blocks=question_blocks(item, base_url=base_url)
        )
    url = item_url(base_url, item)
    budget = item.kind is ItemKind.BUDGET
    heading = "budget reached" if budget else "approval needed"
    if item.decided:
        heading = _STATUS_WORD.get(item.status, str(item.status))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": plain(f"{item.skill}: {heading}")},
        section(f"*{esc(item.title)}*\n{esc(clip(item.body, _BODY_CUT))}"),
    ]
    if item.tool:
        tool, server = item.tool_place
        on = f" on server `{esc(server)}`" if server else ""
        blocks.append(context(f"🔧 Tool `{esc(tool)}`{on}"))
    risk = _risk_text(item)
    if risk:
        blocks.append(context(risk))
    if item.requested_by:
        blocks.append(context(f"🙋 Requested by {esc(item.requested_by)}"))
    if item.risk.rule:
        blocks.append(context(f"📏 Asked by {esc(item.risk.rule)}"))
    if item.risk.approvals_text:
        blocks.append(context(f"👥 {esc(item.risk.approvals_text)}"))
    blocks += preview_blocks(item, url=url)
    if item.risk.ladder:
        blocks.append(context(f"⏰ If nobody decides: {esc(item.risk.ladder)}"))
    if item.risk.steps:
        blocks.append(context(f"⏱ So far: {esc(' · '.join(item.risk.steps))}"))
    if item.status is ItemStatus.EDITED:
        label = "Edited arguments"
        shown = item.final_args
    else:
        label = "Extension" if budget else "Proposed arguments"
        shown = item.args
    blocks.append(section(f"*{label}*\n{args_text(shown, more_url=url)}"))
    if item.decided:
        blocks.append(section(decided_text(item)))
    else:
        blocks.append(buttons(item, url=url))
    blocks.append(context(link(url, "Open on the web page")))
    return Message(text=esc(clip(item.title, 300)), blocks=blocks)


def card_value(item: Item) -> str:
    """A decision button's value: the item and the digest of the card it is on
    (`pizzabot.agent.card_digest`), so a click counts only for what the card showed."""
    return f"{item.id}:{card_digest(item)}"


def read_value(value: str) -> tuple[str, str | None]:
    """(item id, the card's digest) from a button's value; a value without a digest (a card
    sent before cards carried one) binds to the item as the click finds it."""
    item_id, _, seen = value.partition(":")
    return item_id, seen or None


def buttons(item: Item, *, url: str | None = None) -> dict[str, Any]:
    """Approve, Edit (tool calls only) and Reject: one row, the same on a card and in Home
    (a question's own buttons for a question). A call that needs a passkey
    (`pizzabot.agent.step_up`) is approved on the web page: its Approve opens the card there
    (`url`), and its click alone decides nothing (the inbox refuses it and the clicker is
    told)."""
    if item.kind is ItemKind.QUESTION:
        return question_buttons(item)
    budget = item.kind is ItemKind.BUDGET
    approve: dict[str, Any] = {
        "type": "button",
        "action_id": APPROVE,
        "text": plain("Extend" if budget else "Approve"),
        "style": "primary",
        "value": card_value(item),
    }
    if item.risk.step_up is not None and not budget:
        approve["text"] = plain("Approve with passkey")
        if url and url.startswith(("https://", "http://")):
            approve["url"] = url
    reject: dict[str, Any] = {
        "type": "button",
        "action_id": REJECT,
        "text": plain("Stop the run" if budget else "Reject"),
        "style": "danger",
        "value": card_value(item),
        "confirm": {
            "title": plain("Stop the run?" if budget else "Reject this call?"),
            "text": mrkdwn(
                "The run stops here."
                if budget
                else "The tool will not run; you can tell the agent why on the next screen."
            ),
            "confirm": plain("Stop" if budget else "Reject"),
            "deny": plain("Cancel"),
            "style": "danger",
        },
    }
    elements = [approve]
    if not budget:
        elements.append(
            {"type": "button", "action_id": EDIT, "text": plain("Edit"), "value": card_value(item)}
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
    value is "ITEM:GRANT:DIGEST"."""
    digest = card_digest(item)
    return {
        "type": "overflow",
        "action_id": GRANT,
        "options": [option(f"{item.id}:{g}:{digest}", grant_label(g)) for g in item.risk.grants],
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
            line = f"🚫 Closed: the run ended at {at} before anyone decided"
            return line + (f" ({esc(item.reason)})" if item.reason else "")  # e.g. withdrawn by …
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
    text = esc(clip(result, _RESULT_CUT))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": plain(f"{outcome_mark(outcome)} {item.title}")},
        section(text),
        context(
            link(url, "Open the run on the web page") + (" (the result is cut here)" if cut else "")
        ),
        *undo_blocks(item),
    ]
    return Message(text=esc(clip(f"{item.title}: {result}", 300)), blocks=blocks)
