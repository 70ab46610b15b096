"""Block Kit for inbox items: one import for the card, the modals and the text helpers.

The work is split by what it builds — `cards` (an item's message and buttons), `modals` (the
edit and reject modals, and their submitted state back to form values), `questions` (a
question's card and its answer and decline modals, which `cards` draws for a question item),
`formats` (Slack's inputs for emails, links and dates) and `mrkdwn` (escaping and the small
pieces all of them use); this module gathers them, so a listener or a test says
`blocks.message`, `blocks.edit_modal`, `blocks.esc` without knowing which.
"""

from __future__ import annotations

from pizzabot.channels.slack.cards import (
    APPROVE,
    EDIT,
    GRANT,
    REJECT,
    REVOKE_GRANT,
    Message,
    already_text,
    args_text,
    buttons,
    decided_text,
    grant_label,
    grant_menu,
    message,
    note_outcome,
    outcome_mark,
)
from pizzabot.channels.slack.modals import (
    EDIT_VIEW,
    REASON_BLOCK,
    REJECT_VIEW,
    ModalRef,
    edit_modal,
    field_block,
    fields_digest,
    form_errors,
    form_values,
    reason_value,
    reject_modal,
    submitted_args,
)
from pizzabot.channels.slack.mrkdwn import (
    clip,
    context,
    esc,
    item_url,
    plain,
    run_url,
    section,
    when,
    who,
)

__all__ = [
    "APPROVE",
    "EDIT",
    "EDIT_VIEW",
    "GRANT",
    "REASON_BLOCK",
    "REJECT",
    "REJECT_VIEW",
    "REVOKE_GRANT",
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
    "grant_label",
    "grant_menu",
    "item_url",
    "message",
    "note_outcome",
    "outcome_mark",
    "reason_value",
    "reject_modal",
    "run_url",
    "submitted_args",
    "when",
    "who",
]

# The Home tab builds its rows from these under their earlier names.
_context = context
_cut = clip
_plain = plain
_section = section
