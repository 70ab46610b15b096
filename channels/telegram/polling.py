"""Long polling: the local-first way to hear Telegram, with no public URL. One process asks
`getUpdates` in a loop (Telegram holds each request up to `timeout` seconds until an update
comes) and hands each update to the inbound side, in order; the offset it confirms is the
last update it handled, so an update is lost neither to a restart nor to an outage.

Polling and a webhook exclude each other on Telegram's side: the poller removes the bot's
webhook before its first request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pizzabot.channels.telegram.api import TelegramApi, TelegramError

__all__ = ["Poller"]

log = logging.getLogger(__name__)


class Poller:
    """`handle` gets each update; `timeout` is the long poll's, `backoff_max` the longest
    wait after a failure."""

    def __init__(
        self,
        *,
        api: TelegramApi,
        handle: Callable[[dict[str, Any]], Awaitable[None]],
        timeout: float = 30.0,
        backoff_max: float = 60.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.api = api
        self.handle = handle
        self.timeout = timeout
        self.backoff_max = backoff_max
        self.sleep = sleep
        self.offset: int | None = None

    async def run_forever(self) -> None:
        failures = 0
        while True:
            try:
                if self.offset is None:
                    await self.api.call("deleteWebhook", drop_pending_updates=False)
                    self.offset = 0
                await self.poll_once()
                failures = 0
            except TelegramError as exc:
                failures += 1
                wait = exc.retry_after or min(self.backoff_max, 2.0 ** min(failures, 6))
                log.warning("telegram: polling failed (%s); again in %.0f s", exc, wait)
                await self.sleep(wait)

    async def poll_once(self) -> None:
        """One `getUpdates`, and each update it brings handled."""
        updates = await self.api.call(
            "getUpdates",
            # The long poll's own wait, and some more for the answer to arrive.
            http_timeout=self.timeout + 10.0,
            offset=self.offset or None,
            timeout=int(self.timeout),
            allowed_updates=["message", "callback_query"],
        )
        for update in updates if isinstance(updates, list) else []:
            if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
                continue
            try:
                await self.handle(update)
            except Exception:
                log.exception("telegram: an update failed")
            self.offset = int(update["update_id"]) + 1
