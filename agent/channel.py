"""The `Channel` protocol: how an inbox item reaches people, and a recording fake for tests.

A channel only translates between the engine's nouns and its own protocol (Slack messages,
emails). It never decides anything: what comes back in (a button, a reply) becomes a call of
`agent.inbox.decide`. Deliveries go through the outbox (`agent.outbox`), so a channel that is
down only delays delivery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.model import Delivery, Item


class DeliveryError(Exception):
    """A channel could not deliver now. `retry_after` (seconds) honours a rate limit."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent


class Channel(Protocol):
    name: str

    async def deliver(self, item: Item, delivery: Delivery) -> dict[str, Any] | None:
        """Send `item` to `delivery.address`; return the channel's own reference to the copy
        (e.g. Slack's channel and ts), which `update` receives later."""
        ...

    async def update(self, item: Item, delivery: Delivery) -> None:
        """Show the item's new state (decided, expired) on the copy sent earlier."""
        ...

    async def aclose(self) -> None: ...


@dataclass
class RecordingChannel:
    """A channel that keeps what it was asked to do: the fake for unit tests."""

    name: str = "recording"
    delivered: list[tuple[Item, Delivery]] = field(default_factory=list)
    updated: list[tuple[Item, Delivery]] = field(default_factory=list)
    fail_times: int = 0

    async def deliver(self, item: Item, delivery: Delivery) -> dict[str, Any] | None:
        if self.fail_times > 0:
            self.fail_times -= 1
            raise DeliveryError("recording channel told to fail")
        self.delivered.append((item, delivery))
        return {"n": len(self.delivered)}

    async def update(self, item: Item, delivery: Delivery) -> None:
        self.updated.append((item, delivery))

    async def aclose(self) -> None:
        return None
