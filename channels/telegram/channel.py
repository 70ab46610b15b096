"""`TelegramChannel`: the `Channel` that sends inbox items to Telegram chats and edits them
after a decision.

Every card of a run answers the run's first card in that chat, so a chat shows one thread per
run and a reply to any of its cards follows the run up. Telegram's failures become
`DeliveryError`, so the outbox retries: a 429 waits as long as Telegram asks, and an outage
only delays delivery.
"""

from __future__ import annotations

from typing import Any, Protocol

from pizzabot.agent.addresses import TelegramRef
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Delivery, Item, RunStatus
from pizzabot.agent.store import DeliveryReader, RunReader
from pizzabot.channels.chat.card import note_outcome
from pizzabot.channels.chat.threads import thread_of
from pizzabot.channels.telegram.api import NOT_MODIFIED, TelegramApi, TelegramError, delivery_error
from pizzabot.channels.telegram.render import card_message

__all__ = ["TelegramChannel"]


class TelegramStore(DeliveryReader, RunReader, Protocol):
    """What the channel reads: a run's earlier cards, and how a run ended."""


class TelegramChannel:
    """Sends with `sendMessage` and re-renders with `editMessageText`. `base_url` is the web
    page's address, for the cards' links."""

    name = "telegram"

    def __init__(self, *, api: TelegramApi, store: TelegramStore, base_url: str) -> None:
        self.api = api
        self.store = store
        self.base_url = base_url.rstrip("/")

    async def deliver(self, item: Item, delivery: Delivery) -> TelegramRef:
        first = await thread_of(self.store, delivery, TelegramRef)
        msg = card_message(item, base_url=self.base_url, outcome=await self._outcome(item))
        params: dict[str, Any] = {
            "chat_id": delivery.address,
            "text": msg.text,
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": True},
            "reply_markup": msg.markup,
        }
        if first is not None:
            params["reply_parameters"] = {
                "message_id": int(first.thread),
                "allow_sending_without_reply": True,
            }
        try:
            sent = await self.api.call("sendMessage", **params)
        except TelegramError as exc:
            raise delivery_error(exc) from None
        message = str(sent.get("message_id") if isinstance(sent, dict) else "")
        chat = sent.get("chat") if isinstance(sent, dict) else None
        chat_id = str(chat.get("id")) if isinstance(chat, dict) else delivery.address
        thread = first.thread if first is not None else message
        return TelegramRef(chat=chat_id, message=message, thread=thread)

    async def update(self, item: Item, delivery: Delivery) -> None:
        ref = delivery.ref
        if not isinstance(ref, TelegramRef):
            return  # nothing was sent that could be edited
        msg = card_message(item, base_url=self.base_url, outcome=await self._outcome(item))
        try:
            await self.api.call(
                "editMessageText",
                chat_id=ref.chat,
                message_id=int(ref.message),
                text=msg.text,
                parse_mode="HTML",
                link_preview_options={"is_disabled": True},
                # An empty keyboard takes the buttons off a decided card.
                reply_markup=msg.markup or {"inline_keyboard": []},
            )
        except TelegramError as exc:
            if exc.status == 400 and NOT_MODIFIED in exc.description:
                return  # the copy shows the item as it is already
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
