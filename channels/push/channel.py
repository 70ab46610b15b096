"""`PushChannel`: a card that waits, announced to a person's devices by Web Push.

A push passes through a push service the server does not choose (Google's, Mozilla's,
Apple's): the browser picked it. So a push says as little as can still be useful: that one
card waits, and an opaque id (the delivery's own random id) that the page turns into the card
once the person has signed in (`/push/open/{id}`). No tool name, no arguments, no run input,
no skill: the push service learns that something is waiting, and when. The body is still
encrypted for the browser (RFC 8291, `aes128gcm`) and signed with the server's VAPID key
(RFC 8292).

An item is addressed to `PushTarget(SUBSCRIBERS)`. When that delivery is due, the channel
looks up the subscriptions whose person may see the item (`Access.may_see`, the one policy)
and writes one delivery per device: each then has its own attempts, backoff, deadline and
dead letter in the outbox, so one dead push service never holds up another device. A push
service's `404`/`410` means the subscription is gone: it is removed (audited) and that delivery
is given up. `429` and `5xx` are retried, honouring `Retry-After` as the outbox bounds it.

A sent push is not updated when the card is decided: a browser must show a notification for
every push it gets, so a "never mind" push would itself be a notification.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from pizzabot.agent.addresses import SUBSCRIBERS, DeliveryRef
from pizzabot.agent.channel import DeliveryError, retry_after_seconds
from pizzabot.agent.context import utcnow
from pizzabot.agent.devices import Subscription, Subscriptions, holder
from pizzabot.agent.model import Box, Delivery, Item, ItemStatus
from pizzabot.agent.policy.access import Access
from pizzabot.agent.policy.tokens import Tokens
from pizzabot.channels.push.vapid import VapidKey

if TYPE_CHECKING:
    import httpx

__all__ = ["CHANNEL", "PushChannel", "payload"]

log = logging.getLogger(__name__)

CHANNEL = "push"
#: Seconds a push service keeps a push for a device that is offline.
_TTL = 24 * 3600
#: Bytes of a push service's answer read (for the error text); the rest is not waited for.
_ANSWER_CAP = 2048
_GONE = (404, 410)


def payload(delivery: Delivery) -> bytes:
    """What one push says: that a card waits, and the delivery's id to open it by."""
    return json.dumps(
        {"v": 1, "kind": "card", "text": "1 card waits", "open": delivery.id},
        separators=(",", ":"),
    ).encode()


class PushChannel:
    name = CHANNEL

    def __init__(
        self,
        *,
        subscriptions: Subscriptions,
        access: Access,
        tokens: Tokens | None,
        key: VapidKey,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.subscriptions = subscriptions
        self.access = access
        self.tokens = tokens
        self.key = key
        self._client = client
        self._clock = clock

    async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
        if delivery.address == SUBSCRIBERS:
            await self._fan_out(item, delivery)
            return None
        sub = await self.subscriptions.get(delivery.address)
        if sub is None:
            raise DeliveryError("the device unsubscribed", permanent=True)
        who = await holder(sub.principal, tokens=self.tokens, channel=CHANNEL)
        if who is None:
            raise DeliveryError(
                "the token this device was subscribed with is revoked", permanent=True
            )
        if not self.access.may_see(who, item):
            raise DeliveryError(f"{who.describe()} may no longer see this item", permanent=True)
        await self._send(sub, payload(delivery))
        return None

    async def update(self, item: Item, delivery: Delivery) -> None:
        return None  # see the module's docstring: a push cannot be taken back quietly

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def _fan_out(self, item: Item, delivery: Delivery) -> None:
        """One delivery per device whose person may see the item, while it waits."""
        if item.box is not Box.ACTION or item.status is not ItemStatus.PENDING:
            return
        devices: list[str] = []
        for sub in await self.subscriptions.list_subscriptions():
            who = await holder(sub.principal, tokens=self.tokens, channel=CHANNEL)
            if who is not None and self.access.may_see(who, item):
                devices.append(sub.id)
        if devices:
            await self.subscriptions.fan_out(
                item_id=item.id, run_id=delivery.run_id, sub_ids=devices, now=self._clock()
            )

    async def _send(self, sub: Subscription, body: bytes) -> None:
        """Encrypt `body` for the device and hand it to its push service (RFC 8030)."""
        # Imported when a push first goes out: pywebpush loads aiohttp and requests (~13 MiB),
        # and httpx its command line's libraries (rich, pygments, click: ~8 MiB, 0.15 s), that
        # a server whose people never subscribe should not carry.
        import httpx
        from pywebpush import WebPusher

        info = {"endpoint": sub.endpoint, "keys": {"p256dh": sub.p256dh, "auth": sub.auth}}
        try:
            sealed = WebPusher(info).encode(body, "aes128gcm")["body"]
        except Exception as exc:  # the browser's keys are not a P-256 point and a secret
            raise DeliveryError(f"the device's keys are unusable: {exc}", permanent=True) from exc
        headers = {
            "Authorization": self.key.authorization(sub.endpoint),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "TTL": str(_TTL),
            "Urgency": "high",
        }
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False)
        try:
            async with self._client.stream(
                "POST", sub.endpoint, content=sealed, headers=headers
            ) as answer:
                said = await _read_capped(answer)
        except httpx.HTTPError as exc:
            raise DeliveryError(f"push service unreachable: {type(exc).__name__}") from exc
        await self._judge(sub, answer, said)

    async def _judge(self, sub: Subscription, answer: httpx.Response, said: str) -> None:
        status = answer.status_code
        if 200 <= status < 300:
            return
        text = f"push service answered {status}" + (f": {said}" if said else "")
        if status in _GONE:
            await self.subscriptions.remove(
                sub.id, actor="server", channel=CHANNEL, why=text, now=self._clock()
            )
            raise DeliveryError(text, permanent=True)
        if status == 429 or status >= 500:
            wait = retry_after_seconds(
                answer.headers.get("Retry-After"), now=self._clock().timestamp()
            )
            raise DeliveryError(text, retry_after=wait)
        raise DeliveryError(text, permanent=True)


async def _read_capped(answer: httpx.Response) -> str:
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= _ANSWER_CAP:
            break
    return b"".join(chunks)[:_ANSWER_CAP].decode("utf-8", "replace").strip()
