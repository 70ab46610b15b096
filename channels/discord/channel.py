"""`DiscordChannel`: the `Channel` that posts inbox items to Discord channels and edits them
after a decision.

Every card of a run replies to the run's first card in that channel, so a channel reads one
thread of replies per run. A card for a person (`user:` and their user id: an escalation
step's, an on-call hand-over's) goes to their direct messages with the bot, opened first. Discord's failures become `DeliveryError`, so the outbox retries: a
429 waits as long as Discord asks, and an outage only delays delivery.
"""

from __future__ import annotations

from typing import Any, Protocol

from pizzabot.agent.addresses import DiscordRef, DiscordTarget
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Delivery, Item, RunStatus
from pizzabot.agent.store import DeliveryReader, RunReader
from pizzabot.channels.chat.card import note_outcome
from pizzabot.channels.chat.threads import thread_of
from pizzabot.channels.discord.api import DiscordApi, DiscordError, delivery_error
from pizzabot.channels.discord.render import card_message

__all__ = ["DiscordChannel"]


class DiscordStore(DeliveryReader, RunReader, Protocol):
    """What the channel reads: a run's earlier cards, and how a run ended."""


class DiscordChannel:
    """Posts with `POST /channels/{id}/messages` and re-renders with `PATCH`. `base_url` is
    the web page's address, for the cards' links."""

    name = "discord"

    def __init__(self, *, api: DiscordApi, store: DiscordStore, base_url: str) -> None:
        self.api = api
        self.store = store
        self.base_url = base_url.rstrip("/")
        self._dms: dict[str, str] = {}

    async def deliver(self, item: Item, delivery: Delivery) -> DiscordRef:
        first = await thread_of(self.store, delivery, DiscordRef)
        body: dict[str, Any] = card_message(
            item, base_url=self.base_url, outcome=await self._outcome(item)
        )
        if first is not None:
            body["message_reference"] = {"message_id": first.thread, "fail_if_not_exists": False}
        try:
            channel = await self._channel(delivery.address)
            sent = await self.api.request("POST", f"/channels/{channel}/messages", json=body)
        except DiscordError as exc:
            raise delivery_error(exc) from None
        message = str(sent.get("id") if isinstance(sent, dict) else "")
        thread = first.thread if first is not None else message
        return DiscordRef(channel=channel, message=message, thread=thread)

    async def _channel(self, address: str) -> str:
        """The channel an address names; for a person (`user:…`), their direct messages with
        the bot, opened once and remembered."""
        user = DiscordTarget(address).person
        if user is None:
            return address
        if user not in self._dms:
            opened = await self.api.request(
                "POST", "/users/@me/channels", json={"recipient_id": user}
            )
            channel = str(opened.get("id") or "") if isinstance(opened, dict) else ""
            if not channel:
                raise DiscordError("POST /users/@me/channels", 502, "no channel id", None)
            self._dms[user] = channel
        return self._dms[user]

    async def update(self, item: Item, delivery: Delivery) -> None:
        ref = delivery.ref
        if not isinstance(ref, DiscordRef):
            return  # nothing was posted that could be edited
        body = card_message(item, base_url=self.base_url, outcome=await self._outcome(item))
        try:
            await self.api.request(
                "PATCH", f"/channels/{ref.channel}/messages/{ref.message}", json=body
            )
        except DiscordError as exc:
            raise delivery_error(exc) from None

    async def aclose(self) -> None:
        await self.api.aclose()

    async def _outcome(self, item: Item) -> RunStatus | None:
        if item.box is not Box.UNREAD:
            return None
        try:
            return note_outcome(item, await self.store.get_run(item.run_id))
        except NotFound:
            return None
