"""Approve all in Slack: a button on each card of a model turn that left several calls waiting.

Every card of such a turn carries "Approve all (N)" next to its own buttons (N: the turn's
waiting calls when the card was drawn). A click approves each call the clicker may approve
alone, one decision each through `pizzabot.agent.batch.approve_all` (so every card is then updated by
the outbox, as after a single approval), and tells the clicker, in a note only they see,
what was approved and what was left out and why.

The button's value is the card's item id and one digest of the turn's cards as drawn
(`pizzabot.agent.batch.batch_digest`: a value holds at most 2000 characters, too few for every
call's digest): when any call changed since, the click approves none of them and says so, and
the turn's cards are drawn again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.batch import TurnReader, approve_all, batch_digest, turn_items
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Item, ItemKind
from pizzabot.agent.policy import SLACK, Principal
from pizzabot.channels.slack.blocks import Message, esc
from pizzabot.channels.slack.payloads import where
from pizzabot.channels.slack.ports import SlackDesk

__all__ = ["APPROVE_ALL", "on_approve_all", "with_approve_all"]

APPROVE_ALL = "pizza_approve_all"


async def with_approve_all(msg: Message, item: Item, store: TurnReader) -> Message:
    """`msg` (the card of `item`) with "Approve all (N)" in its button row, when the item
    waits with other calls of its turn; else `msg` unchanged."""
    if item.box is not Box.ACTION or item.kind is not ItemKind.TOOL or item.decided:
        return msg
    turn = await turn_items(store, item.run_id)
    n = len(turn)
    if n < 2:
        return msg
    button = {
        "type": "button",
        "action_id": APPROVE_ALL,
        "text": {"type": "plain_text", "text": f"Approve all ({n})"},
        "value": f"{item.id} {batch_digest(turn)}",
    }
    blocks: list[dict[str, Any]] = []
    for block in msg.blocks:
        if block.get("type") == "actions" and block.get("block_id") == f"decide:{item.id}":
            block = {**block, "elements": [*block["elements"], button]}
        blocks.append(block)
    return replace(msg, blocks=blocks)


async def on_approve_all(
    inbound: SlackDesk, *, body: dict[str, Any], client: AsyncWebClient, retried: bool
) -> None:
    """Approve the clicked card's turn as the clicker, and tell them how it went."""
    user = str(body["user"]["id"])
    channel, thread = where(body)
    # "item-id digest"; a button drawn without the digest approves nothing (it mismatches).
    item_id, _, seen = str(body["actions"][0].get("value") or "").partition(" ")
    try:
        item = await inbound.store.get_item(item_id)
    except NotFound:
        await inbound.tell(client, channel=channel, user=user, text="This item no longer exists.")
        return
    by = Principal.of(SLACK, user)
    batch = await approve_all(inbound.inbox, item.run_id, by=by, seen=seen.strip()[:64])
    if retried and not batch.approved:
        return  # Slack re-sent a click whose first try did the approving and said so
    text = esc(batch.summary())
    await inbound.tell(client, channel=channel, user=user, text=text, thread_ts=thread)
