"""The `Channel` protocol: how an inbox item reaches people, and a recording fake for tests.

A channel only translates between the engine's nouns and its own protocol (Slack messages,
emails). It never decides anything: what comes back in (a button, a reply) becomes a call of
`agent.inbox.decide`. Deliveries go through the outbox (`agent.outbox`), so a channel that is
down only delays delivery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from agent.addresses import DeliveryRef, EmailRef, SlackRef
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

    async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
        """Send `item` to `delivery.address`; return the channel's own reference to the copy
        (Slack's conversation and ts, a mail's Message-ID), which `update` receives later as
        `delivery.ref`."""
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

    async def deliver(self, item: Item, delivery: Delivery) -> DeliveryRef | None:
        if self.fail_times > 0:
            self.fail_times -= 1
            raise DeliveryError("recording channel told to fail")
        self.delivered.append((item, delivery))
        # A reference of the kind the channel it stands in for would give.
        n = str(len(self.delivered))
        if self.name == "slack":
            return SlackRef(channel=delivery.address, ts=n, thread_ts=n)
        if self.name == "email":
            return EmailRef(message_id=f"<{n}@recording>", thread=n, address=delivery.address)
        return None

    async def update(self, item: Item, delivery: Delivery) -> None:
        self.updated.append((item, delivery))

    async def aclose(self) -> None:
        return None
