"""Typed addresses: where a channel delivers an item (a target), and the channel's own
reference to the copy it sent (a ref), one type per channel in a `kind`-tagged union.

A ref is what a later update of the copy needs (Slack's conversation and `ts`; a mail's
Message-ID and its thread) and what a reply or a button click is traced back by
(`external_id`). Both are stored as the deliveries table's columns and JSON, in the shape
earlier versions wrote (the external id under "id"), so existing databases keep loading.

    Target      = SlackTarget(conversation) | EmailTarget(address) | PushTarget(subscription)
                | TeamsTarget(conversation) | DiscordTarget(channel) | TelegramTarget(chat)
    (a Teams or Discord target may name a person, `user:ID`: the channel opens their chat)
    DeliveryRef = SlackRef(channel, ts, thread_ts) | EmailRef(message_id, thread, address)
                | TeamsRef(service_url, conversation, activity, thread)
                | DiscordRef(channel, message, thread) | TelegramRef(chat, message, thread)

A chat ref's `thread` is the message the run's first card is (its own for that first card),
which the run's later cards answer, and a reply to which follows the run up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, assert_never

__all__ = [
    "PERSON",
    "SUBSCRIBERS",
    "DeliveryRef",
    "DiscordRef",
    "DiscordTarget",
    "EmailRef",
    "EmailTarget",
    "PushTarget",
    "SlackRef",
    "SlackTarget",
    "Target",
    "TeamsRef",
    "TeamsTarget",
    "TelegramRef",
    "TelegramTarget",
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


#: The start of a Teams or Discord address that names a person, not a conversation: the
#: channel opens the bot's personal chat (a direct message) with them to deliver there.
PERSON = "user:"


def _person_of(address: str) -> str | None:
    return address.removeprefix(PERSON) if address.startswith(PERSON) else None


@dataclass(frozen=True)
class TeamsTarget:
    """A Teams conversation: a channel's (`19:…@thread.tacv2`), a group chat's, or the
    personal chat a person has with the bot; or a person (`user:` and their Entra object id),
    whose personal chat the channel opens."""

    conversation: str
    kind: Literal["teams"] = "teams"

    @classmethod
    def to_person(cls, aad_object_id: str) -> TeamsTarget:
        return cls(PERSON + aad_object_id)

    @property
    def address(self) -> str:
        return self.conversation

    @property
    def person(self) -> str | None:
        """The Entra object id of the person this target names (None: a conversation)."""
        return _person_of(self.conversation)


@dataclass(frozen=True)
class DiscordTarget:
    """A Discord channel (its id); or a person (`user:` and their user id), whose direct
    messages with the bot the channel opens."""

    channel: str
    kind: Literal["discord"] = "discord"

    @classmethod
    def to_person(cls, user_id: str) -> DiscordTarget:
        return cls(PERSON + user_id)

    @property
    def address(self) -> str:
        return self.channel

    @property
    def person(self) -> str | None:
        """The user id of the person this target names (None: a channel)."""
        return _person_of(self.channel)


@dataclass(frozen=True)
class TelegramTarget:
    """A Telegram chat (its id; a person's private chat with the bot has their user id)."""

    chat: str
    kind: Literal["telegram"] = "telegram"

    @property
    def address(self) -> str:
        return self.chat


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


Target = SlackTarget | EmailTarget | PushTarget | TeamsTarget | DiscordTarget | TelegramTarget

_TARGETS: dict[str, type[Target]] = {
    "slack": SlackTarget,
    "email": EmailTarget,
    "push": PushTarget,
    "teams": TeamsTarget,
    "discord": DiscordTarget,
    "telegram": TelegramTarget,
}


def target_of(channel: str, address: str) -> Target:
    """The target a delivery row names (its channel and address columns)."""
    kind = _TARGETS.get(channel)
    if kind is None:
        raise ValueError(f"no target kind for channel {channel!r}")
    return kind(address)


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


@dataclass(frozen=True)
class TeamsRef:
    """A card posted through the Bot Framework connector at `service_url`: its conversation
    (without a thread), its activity id and the activity id of its thread's first card. Its
    external id is the conversation Teams gives a reply in that thread
    (`…;messageid=THREAD`)."""

    service_url: str
    conversation: str
    activity: str
    thread: str
    kind: Literal["teams"] = "teams"

    @property
    def external_id(self) -> str:
        return f"{self.conversation};messageid={self.thread}"


@dataclass(frozen=True)
class DiscordRef:
    """A message in a Discord channel (ids are unique across Discord)."""

    channel: str
    message: str
    thread: str
    kind: Literal["discord"] = "discord"

    @property
    def external_id(self) -> str:
        return self.message


@dataclass(frozen=True)
class TelegramRef:
    """A message in a Telegram chat (its id counts within the chat only)."""

    chat: str
    message: str
    thread: str
    kind: Literal["telegram"] = "telegram"

    @property
    def external_id(self) -> str:
        return f"{self.chat}:{self.message}"


DeliveryRef = SlackRef | EmailRef | TeamsRef | DiscordRef | TelegramRef


def ref_to_json(ref: DeliveryRef) -> dict[str, Any]:
    """The stored shape: the ref's fields, its kind, and its external id under "id"."""
    fields: dict[str, str]
    if isinstance(ref, SlackRef):
        fields = {"channel": ref.channel, "ts": ref.ts, "thread_ts": ref.thread_ts}
    elif isinstance(ref, EmailRef):
        fields = {"thread": ref.thread, "address": ref.address}
    elif isinstance(ref, TeamsRef):
        fields = {
            "service_url": ref.service_url,
            "conversation": ref.conversation,
            "activity": ref.activity,
            "thread": ref.thread,
        }
    elif isinstance(ref, DiscordRef | TelegramRef):
        where = ref.channel if isinstance(ref, DiscordRef) else ref.chat
        fields = {"where": where, "message": ref.message, "thread": ref.thread}
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
    return _chat_ref(kind, data)


def _chat_ref(kind: str, data: dict[str, Any]) -> DeliveryRef | None:
    """A stored Teams, Discord or Telegram ref; None when a part is missing."""

    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    if kind == "teams" and text("conversation") and text("activity"):
        return TeamsRef(
            service_url=text("service_url"),
            conversation=text("conversation"),
            activity=text("activity"),
            thread=text("thread") or text("activity"),
        )
    if kind in ("discord", "telegram") and text("where") and text("message"):
        thread = text("thread") or text("message")
        if kind == "discord":
            return DiscordRef(channel=text("where"), message=text("message"), thread=thread)
        return TelegramRef(chat=text("where"), message=text("message"), thread=thread)
    return None
