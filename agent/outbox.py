"""The outbox dispatcher: delivers inbox items to channels, with retries, and updates copies.

Deliveries are rows written with their item, so an item is never lost because Slack or SMTP
was down: the dispatcher keeps trying with exponential backoff (honouring a channel's
Retry-After), and once a delivery is sent, a decision marks it for an update so every copy
shows the outcome.

A failure's text is kept as the delivery's last error and logged, and Slack's or an SMTP
server's answer can echo the token or password it was given: it goes through the server's
:class:`~agent.redaction.Redactor` first, then is cut to :data:`MAX_ERROR` characters (in
that order, so a cut cannot leave half a secret the redactor no longer recognises).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from agent.channel import Channel, DeliveryError
from agent.context import Context
from agent.model import Delivery, DeliveryStatus
from agent.redaction import Redactor
from agent.tasks import stop_if_cancelled

log = logging.getLogger(__name__)

#: Characters of a failure's text kept as a delivery's last error.
MAX_ERROR = 500


class Dispatcher:
    def __init__(
        self,
        ctx: Context,
        channels: dict[str, Channel],
        *,
        max_attempts: int = 12,
        backoff_base: float = 1.0,
        backoff_max: float = 300.0,
        poll_interval: float = 2.0,
        redactor: Redactor | None = None,
        wake: asyncio.Event | None = None,
    ) -> None:
        self.ctx = ctx
        self.channels = channels
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.poll_interval = poll_interval
        self.redact = redactor or Redactor()
        #: What it sleeps on between passes; given when `ctx.wake_outbox` rings it.
        self._wake = wake or asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run_forever(self) -> None:
        while True:
            stop_if_cancelled()
            # Cleared before the pass, not after: a wake-up during it must not be lost.
            self._wake.clear()
            try:
                await self.drain()
            except Exception:
                log.exception("outbox pass failed")
            # `asyncio.timeout`, not `wait_for`: on Python 3.11 `wait_for` swallows a cancel
            # that arrives as the event is set, and the dispatcher would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_interval):
                    await self._wake.wait()

    async def drain(self) -> int:
        """Do every due delivery and update once; return how many were handled."""
        due = await self.ctx.store.due_deliveries(now=self.ctx.clock())
        for delivery in due:
            await self._one(delivery)
        return len(due)

    async def _one(self, delivery: Delivery) -> None:
        store, now = self.ctx.store, self.ctx.clock()
        channel = self.channels.get(delivery.channel)
        if channel is None:
            await store.delivery_failed(
                delivery.id,
                error=f"channel {delivery.channel!r} is not configured",
                retry_at=None,
                now=now,
            )
            return
        item = await store.get_item(delivery.item_id)
        try:
            if delivery.status is DeliveryStatus.PENDING:
                ref = await channel.deliver(item, delivery)
                await store.delivery_sent(delivery.id, ref=ref, now=self.ctx.clock())
            else:
                await channel.update(item, delivery)
                await store.delivery_updated(delivery.id, now=self.ctx.clock())
        except Exception as exc:
            retry_after = exc.retry_after if isinstance(exc, DeliveryError) else None
            permanent = isinstance(exc, DeliveryError) and exc.permanent
            attempts = delivery.attempts + 1
            if permanent or attempts >= self.max_attempts:
                retry_at = None
            else:
                delay = min(self.backoff_max, self.backoff_base * 2 ** (attempts - 1))
                retry_at = now + timedelta(seconds=max(delay, retry_after or 0))
            error = self.redact(str(exc))
            log.warning(
                "delivery %s on %s failed (attempt %d): %s",
                delivery.id,
                delivery.channel,
                attempts,
                error,
                extra={"run_id": delivery.run_id, "item_id": delivery.item_id},
            )
            await store.delivery_failed(
                delivery.id, error=error[:MAX_ERROR], retry_at=retry_at, now=now
            )
