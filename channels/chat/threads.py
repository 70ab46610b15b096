"""A run's thread on a chat platform: every card of a run answers the run's first card at the
same address, so a chat shows one thread per run, and a reply to any of them finds the run.
"""

from __future__ import annotations

from pizzabot.agent.addresses import DiscordRef, TeamsRef, TelegramRef
from pizzabot.agent.channel import DeliveryError
from pizzabot.agent.model import Delivery, DeliveryStatus
from pizzabot.agent.store import DeliveryReader

__all__ = ["thread_of"]

ChatRef = TeamsRef | DiscordRef | TelegramRef


async def thread_of(
    store: DeliveryReader, delivery: Delivery, kind: type[ChatRef]
) -> ChatRef | None:
    """The ref of the run's first card at this delivery's address (its `thread` is what a
    later card answers), or None when this is the first.

    While an earlier card of the run is still unsent, wait for it (retry later): sending now
    would start a second thread for the same run."""
    earlier = [
        d
        for d in await store.run_deliveries(delivery.run_id, delivery.channel)
        if d.id != delivery.id
        and d.address == delivery.address
        and (d.created_at, d.id) < (delivery.created_at, delivery.id)
    ]
    for d in earlier:
        if d.status is DeliveryStatus.SENT and isinstance(d.ref, kind):
            return d.ref
    if any(d.status is DeliveryStatus.PENDING for d in earlier):
        raise DeliveryError("waiting for the run's first card", retry_after=1.0)
    return None
