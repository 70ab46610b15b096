"""The `Channel` protocol: how an inbox item reaches people, and a recording fake for tests.

A channel only translates between the engine's nouns and its own protocol (Slack messages,
emails). It never decides anything: what comes back in (a button, a reply) becomes a call of
`pizzabot.agent.inbox.decide`. Deliveries go through the outbox (`pizzabot.agent.outbox`), so a channel that is
down only delays delivery. A channel tells the outbox how it failed with `DeliveryError`;
the outbox bounds everything a channel hands it (an attempt's time, a `Retry-After`), so a
channel passes a receiver's answer on as it came.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Protocol

from pizzabot.agent.addresses import DeliveryRef, EmailRef, SlackRef
from pizzabot.agent.model import Delivery, Item


class DeliveryError(Exception):
    """A channel could not deliver now. `retry_after` (seconds) is what the receiver asked
    for (a rate limit's wait), unbounded: the outbox caps it. `permanent`: retrying cannot
    help (a refusal), so the delivery is given up at once."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, permanent: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent


def retry_after_seconds(value: str | None, *, now: float) -> float | None:
    """The seconds an HTTP `Retry-After` header asks to wait, from `now` (Unix seconds):
    delta-seconds or an HTTP-date (RFC 9110, 10.2.3). None when there is none or it cannot be
    read; a date in the past is 0. Not capped here: a receiver may ask for any wait, and the
    outbox decides how much of it to honour."""
    text = (value or "").strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        return float(text)  # an absurdly long number is inf, not an error
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": the date is in UTC, its source unknown
        when = when.replace(tzinfo=UTC)
    wait = when.timestamp() - now
    return max(0.0, wait) if math.isfinite(wait) else None


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
