"""`SlackChannel`: the `Channel` that posts inbox items to Slack and updates them after a decision.

Every item of a run goes into one thread under the run's first message, so a channel shows one
line per run; the first message's ts is found through the run's earlier deliveries. Slack's
failures become `DeliveryError`, so the outbox retries: a 429 carries Slack's Retry-After, and
an outage only delays delivery.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.addresses import SlackRef
from pizzabot.agent.batch import TurnReader
from pizzabot.agent.channel import DeliveryError
from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Box, Delivery, DeliveryStatus, Item, RunStatus
from pizzabot.agent.store import DeliveryReader, RunReader
from pizzabot.channels.slack import blocks
from pizzabot.channels.slack.batch import with_approve_all

log = logging.getLogger(__name__)

#: Slack errors that the same request will meet again however long the outbox waits.
_PERMANENT = frozenset(
    {
        "invalid_blocks",
        "invalid_blocks_format",
        "invalid_arguments",
        "msg_too_long",
        "no_text",
        "message_not_found",
        "cant_update_message",
        "edit_window_closed",
    }
)


class RunDeliveries(DeliveryReader, RunReader, TurnReader, Protocol):
    """What the channel reads from the store: a run's deliveries on one channel, oldest first,
    the run (how it ended, for its Unread note's mark), and its turn's waiting cards."""


def is_user(address: str) -> bool:
    """A user id (U…, or W… on Enterprise Grid) means a direct message."""
    return address[:1] in {"U", "W"}


def delivery_error(exc: Exception, what: str) -> DeliveryError:
    """The outbox's view of a failed Slack call: when to retry, and whether it is worth it."""
    if isinstance(exc, SlackApiError):
        status = getattr(exc.response, "status_code", None)
        error = ""
        data = getattr(exc.response, "data", None)
        if isinstance(data, dict):
            error = str(data.get("error") or "")
        if status == 429 or error == "ratelimited":
            headers = getattr(exc.response, "headers", None) or {}
            retry = _retry_after(headers)
            return DeliveryError(f"{what}: rate limited by Slack", retry_after=retry)
        return DeliveryError(
            f"{what}: Slack answered {status} {error or ''}".strip(),
            permanent=error in _PERMANENT,
        )
    return DeliveryError(f"{what}: {type(exc).__name__}: {exc}")


def _retry_after(headers: Any) -> float:
    value = None
    for key in ("Retry-After", "retry-after"):
        got = headers.get(key) if hasattr(headers, "get") else None
        if isinstance(got, list):
            got = got[0] if got else None
        if got is not None:
            value = got
            break
    try:
        return max(float(value), 0.0) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


class SlackChannel:
    """Posts items with `chat.postMessage` (threaded per run) and re-renders them with
    `chat.update`. `base_url` is the web page's address, for links in the messages."""

    name = "slack"

    def __init__(self, *, client: AsyncWebClient, store: RunDeliveries, base_url: str) -> None:
        self.client = client
        self.store = store
        self.base_url = base_url.rstrip("/")
        self._dm: dict[str, str] = {}

    async def deliver(self, item: Item, delivery: Delivery) -> SlackRef:
        thread_ts = await self._thread_of(delivery)
        try:
            channel = await self._conversation(delivery.address)
            msg = blocks.message(item, base_url=self.base_url, outcome=await self._outcome(item))
            msg = await with_approve_all(msg, item, self.store)
            args: dict[str, Any] = {
                "channel": channel,
                "text": msg.text,
                "blocks": msg.blocks,
                "unfurl_links": False,
                "unfurl_media": False,
            }
            if thread_ts:
                args["thread_ts"] = thread_ts
            response = await self.client.chat_postMessage(**args)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            raise delivery_error(exc, "chat.postMessage") from exc
        ts = str(response["ts"])
        posted_in = str(response.get("channel") or channel)
        return SlackRef(channel=posted_in, ts=ts, thread_ts=thread_ts or ts)

    async def update(self, item: Item, delivery: Delivery) -> None:
        ref = delivery.ref
        if not isinstance(ref, SlackRef) or not ref.channel:
            return  # nothing was posted that could be updated
        msg = blocks.message(item, base_url=self.base_url, outcome=await self._outcome(item))
        msg = await with_approve_all(msg, item, self.store)
        try:
            await self.client.chat_update(
                channel=ref.channel, ts=ref.ts, text=msg.text, blocks=msg.blocks
            )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            raise delivery_error(exc, "chat.update") from exc

    async def aclose(self) -> None:
        return None  # the Web API client opens a session per call: nothing is held

    async def _outcome(self, item: Item) -> RunStatus | None:
        """How the run of an Unread note ended (None for an action, or when unknown)."""
        if item.box is not Box.UNREAD:
            return None
        try:
            return blocks.note_outcome(item, await self.store.get_run(item.run_id))
        except NotFound:
            return None

    async def _thread_of(self, delivery: Delivery) -> str | None:
        """The ts of the run's first message at this address, or None when this is the first.

        While an earlier delivery of the run is still unsent, wait for it (retry later):
        posting now would start a second thread for the same run.
        """
        earlier = [
            d
            for d in await self.store.run_deliveries(delivery.run_id, self.name)
            if d.id != delivery.id
            and d.address == delivery.address
            and (d.created_at, d.id) < (delivery.created_at, delivery.id)
        ]
        for d in earlier:
            if d.status is DeliveryStatus.SENT and isinstance(d.ref, SlackRef):
                return d.ref.thread_ts
        if any(d.status is DeliveryStatus.PENDING for d in earlier):
            raise DeliveryError("waiting for the run's first Slack message", retry_after=1.0)
        return None

    async def _conversation(self, address: str) -> str:
        """A channel id for `chat.postMessage`; a user id is turned into their DM with the bot,
        whose id `chat.update` needs later."""
        if not is_user(address):
            return address
        if address not in self._dm:
            response = await self.client.conversations_open(users=address)
            channel = response.get("channel") or {}
            self._dm[address] = str(channel.get("id") or address)
        return self._dm[address]
