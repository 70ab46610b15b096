"""Undo on a `notify` FYI in Slack: the button on the FYI's message, and its click.

The click goes to `pizzabot.agent.inbox.Inbox.undo` as the Slack user who made it, which
says whether they may (whoever may decide the tool's cards), refuses a second Undo and
refuses while the kill switch is on. The clicker is told the outcome in a note only they
see; every copy of the FYI is updated by the outbox to say how it went.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.errors import AlreadyUndone, Conflict, NotAllowed, NotFound
from pizzabot.agent.model import Item
from pizzabot.agent.policy import Principal
from pizzabot.agent.undo import undo_line
from pizzabot.channels.slack.mrkdwn import context, esc, plain
from pizzabot.channels.slack.payloads import where
from pizzabot.channels.slack.ports import SlackDesk

__all__ = ["UNDO", "on_undo", "undo_blocks"]

log = logging.getLogger(__name__)

#: The action id of the FYI's Undo button; its value is the item's id.
UNDO = "undo"


def undo_blocks(item: Item) -> list[dict[str, Any]]:
    """The FYI's Undo: a button while it is offered, then how it went."""
    undo = item.undo
    if undo is None:
        return []
    if undo.state != "offered":
        return [context(esc(undo_line(undo)))]
    # The button's confirmation says what runs: one click must not surprise anyone.
    button = {
        "type": "button",
        "action_id": UNDO,
        "text": plain("Undo"),
        "style": "danger",
        "value": item.id,
        "confirm": {
            "title": plain("Undo this?"),
            "text": {"type": "mrkdwn", "text": esc(f"This runs {undo.tool}, once.")},
            "confirm": plain("Undo"),
            "deny": plain("Cancel"),
            "style": "danger",
        },
    }
    return [
        context(esc(undo_line(undo))),
        {"type": "actions", "block_id": f"undo:{item.id}"[:255], "elements": [button]},
    ]


async def on_undo(
    inbound: SlackDesk, *, body: dict[str, Any], client: AsyncWebClient, retried: bool
) -> None:
    """The Undo button: the compensating call, and a note to the clicker saying how it went."""
    if retried:
        return  # Slack sent the click again: the first one was acted on
    user = str(body["user"]["id"])
    channel, thread = where(body)
    item_id = str(body["actions"][0].get("value") or "")
    try:
        item = await inbound.inbox.undo(item_id, by=Principal.of("slack", user))
        note = undo_line(item.undo) if item.undo is not None else "Undone."
    except AlreadyUndone as exc:
        note = f"Nothing done: {exc}."
    except NotFound:
        note = "This item no longer exists."
    except (NotAllowed, Conflict) as exc:
        note = f"Not undone: {exc}"
    await inbound.tell(client, channel=channel, user=user, text=esc(note), thread_ts=thread)
