"""Typed addresses: where a channel delivers an item (a target), and the channel's own
reference to the copy it sent (a ref), one type per channel in a `kind`-tagged union.

A ref is what a later update of the copy needs (Slack's conversation and `ts`; a mail's
Message-ID and its thread) and what a reply or a button click is traced back by
(`external_id`). Both are stored as the deliveries table's columns and JSON, in the shape
earlier versions wrote (the external id under "id"), so existing databases keep loading.

    Target      = SlackTarget(conversation) | EmailTarget(address) | PushTarget(subscription)
    DeliveryRef = SlackRef(channel, ts, thread_ts) | EmailRef(message_id, thread, address)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, assert_never

__all__ = [
    "SUBSCRIBERS",
    "DeliveryRef",
    "EmailRef",
    "EmailTarget",
    "PushTarget",
    "SlackRef",
    "SlackTarget",
    "Target",
    "ref_from_json",
    "ref_to_json",
    "target_of",
]


@dataclass(frozen=True)
class SlackTarget:
    """A Slack conversation: a channel id, or a user id (sent as the bot's direct message)."""

    conversation: str
    kind: Literal["slack"] = "slack"

    @property
    def address(self) -> str:
        return self.conversation


@dataclass(frozen=True)
class EmailTarget:
    """One mailbox."""

    address: str
    kind: Literal["email"] = "email"


#: A push target's address before the push channel fans it out to devices.
SUBSCRIBERS = "subscribers"


@dataclass(frozen=True)
class PushTarget:
    """Web Push: one browser's subscription, by its id; or `SUBSCRIBERS`, every subscribed
    device of whoever may see the item, which the push channel turns into one delivery per
    device when it is due (so one device's push service never holds up another's)."""

    subscription: str = SUBSCRIBERS
    kind: Literal["push"] = "push"

    @property
    def address(self) -> str:
        return self.subscription


Target = SlackTarget | EmailTarget | PushTarget


def target_of(channel: str, address: str) -> Target:
    """The target a delivery row names (its channel and address columns)."""
    if channel == "slack":
        return SlackTarget(address)
    if channel == "email":
        return EmailTarget(address)
    if channel == "push":
        return PushTarget(address)
    raise ValueError(f"no target kind for channel {channel!r}")


@dataclass(frozen=True)
class SlackRef:
    """A posted message: the conversation Slack answered with (a DM's id for a user), its
    `ts`, and the `ts` of the thread it is in (its own when it started the thread)."""

    channel: str
    ts: str
    thread_ts: str
    kind: Literal["slack"] = "slack"

    @property
    def external_id(self) -> str:
        return self.ts


@dataclass(frozen=True)
class EmailRef:
    """A sent mail: its Message-ID, the Message-ID of its thread's first mail, and to whom."""

    message_id: str
    thread: str
    address: str
    kind: Literal["email"] = "email"

    @property
    def external_id(self) -> str:
        return self.message_id


DeliveryRef = SlackRef | EmailRef


def ref_to_json(ref: DeliveryRef) -> dict[str, Any]:
    """The stored shape: the ref's fields, its kind, and its external id under "id"."""
    if isinstance(ref, SlackRef):
        fields = {"channel": ref.channel, "ts": ref.ts, "thread_ts": ref.thread_ts}
    elif isinstance(ref, EmailRef):
        fields = {"thread": ref.thread, "address": ref.address}
    else:
        assert_never(ref)
    return {"kind": ref.kind, "id": ref.external_id, **fields}


def ref_from_json(data: dict[str, Any] | None, *, channel: str) -> DeliveryRef | None:
    """A stored ref; rows written before refs carried their kind are told apart by the
    delivery's channel. None when nothing was stored or the shape is not one we know."""
    if not data:
        return None
    kind = data.get("kind", channel)
    if kind == "slack" and data.get("ts"):
        ts = str(data["ts"])
        return SlackRef(
            channel=str(data.get("channel") or ""),
            ts=ts,
            thread_ts=str(data.get("thread_ts") or ts),
        )
    if kind == "email" and data.get("id"):
        message_id = str(data["id"])
        return EmailRef(
            message_id=message_id,
            thread=str(data.get("thread") or message_id),
            address=str(data.get("address") or ""),
        )
    return None
