"""`TeamsChannel`: the `Channel` that posts inbox items to Teams conversations as Adaptive
Cards, through the Bot Framework connector, and replaces them after a decision.

Every card of a run replies to the run's first card (in a channel: into its thread), so a
channel shows one thread per run and a reply in it follows the run up. A card for a person
(`user:` and their Entra object id: an escalation step's, an on-call hand-over's) goes to
their personal chat with the bot, which the connector opens. The connector's
failures become `DeliveryError`, so the outbox retries: a 429 waits as asked, and an outage
only delays delivery.
"""

from __future__ import annotations

from typing import Any, Protocol

from pizzabot.agent.addresses import TeamsRef, TeamsTarget
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Delivery, Item, RunStatus
from pizzabot.agent.store import DeliveryReader, RunReader
from pizzabot.channels.chat.card import clip, note_outcome
from pizzabot.channels.chat.threads import thread_of
from pizzabot.channels.teams.cards import attachment, item_card
from pizzabot.channels.teams.connector import Connector, ConnectorError, delivery_error

__all__ = ["TeamsChannel"]


class TeamsStore(DeliveryReader, RunReader, Protocol):
    """What the channel reads: a run's earlier cards, and how a run ended."""


class TeamsChannel:
    """Posts and replaces cards through `connector`. `base_url` is the web page's address."""

    name = "teams"

    def __init__(self, *, connector: Connector, store: TeamsStore, base_url: str) -> None:
        self.connector = connector
        self.store = store
        self.base_url = base_url.rstrip("/")
        self._personal: dict[str, str] = {}

    def activity(self, item: Item, outcome: RunStatus | None) -> dict[str, Any]:
        """The message activity that carries `item`'s card, as everyone sees it."""
        card = item_card(item, base_url=self.base_url, outcome=outcome)
        return {
            "type": "message",
            "summary": clip(item.title, 200),
            "attachments": [attachment(card)],
        }

    async def deliver(self, item: Item, delivery: Delivery) -> TeamsRef:
        first = await thread_of(self.store, delivery, TeamsRef)
        activity = self.activity(item, await self._outcome(item))
        try:
            conversation = await self._conversation(delivery.address)
            service_url = self.connector.service_url_of(conversation)
            if first is None:
                sent = await self.connector.send(service_url, conversation, activity)
            else:
                sent = await self.connector.reply(service_url, conversation, first.thread, activity)
        except ConnectorError as exc:
            raise delivery_error(exc) from None
        thread = first.thread if first is not None else sent
        return TeamsRef(
            service_url=service_url, conversation=conversation, activity=sent, thread=thread
        )

    async def _conversation(self, address: str) -> str:
        """The conversation an address names; for a person (`user:…`), their personal chat
        with the bot, opened once and remembered."""
        user = TeamsTarget(address).person
        if user is None:
            return address.partition(";")[0]
        if user not in self._personal:
            service_url = self.connector.default_service_url
            self._personal[user] = await self.connector.open_personal(service_url, user)
        return self._personal[user]

    async def update(self, item: Item, delivery: Delivery) -> None:
        ref = delivery.ref
        if not isinstance(ref, TeamsRef):
            return  # nothing was posted that could be replaced
        activity = self.activity(item, await self._outcome(item))
        service_url = ref.service_url or self.connector.service_url_of(ref.conversation)
        try:
            await self.connector.update(service_url, ref.conversation, ref.activity, activity)
        except ConnectorError as exc:
            raise delivery_error(exc) from None

    async def aclose(self) -> None:
        return None  # the HTTP client is closed with the server

    async def _outcome(self, item: Item) -> RunStatus | None:
        if item.box is not Box.UNREAD:
            return None
        try:
            return note_outcome(item, await self.store.get_run(item.run_id))
        except NotFound:
            return None
