"""A person's devices: the browsers that get Web Push, and the passkeys that sign them in.

Both belong to one principal, kept by its `Principal.requester` key: `owner` for whoever
holds the API token, `token:ID` for the person a named `decide` or `admin` token names,
`web:ADDRESS` for a person who signed in on the page by a mail link (`Principal.by_mail`). A
key is turned back into a principal on every use (`holder`), so a revoked token's devices
stop at once, on every server sharing the database.

The nouns are here; `pizzabot.store.phone` keeps them (`Subscriptions`, `PasskeyStore`), the
push channel (`pizzabot.channels.push`) sends to subscriptions, and `pizzabot.agent.passkeys`
runs the WebAuthn ceremonies over passkeys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.tokens import Tokens, principal_of

__all__ = [
    "OWNER",
    "Challenge",
    "PasskeyStore",
    "StoredPasskey",
    "Subscription",
    "Subscriptions",
    "holder",
]

#: The key of the owner's devices.
OWNER = "owner"
_TOKEN = "token:"
_MAILED = "web:"


async def holder(key: str, *, tokens: Tokens | None, channel: str) -> Principal | None:
    """The principal whose devices are kept under `key`, through `channel`; None when it is a
    token that was revoked (or one this server cannot look up)."""
    if key == OWNER:
        return Principal.owner(channel)
    if key.startswith(_MAILED):
        # What they may see and decide is read from the skills' lists at every use.
        return Principal.by_mail(key[len(_MAILED) :])
    if not key.startswith(_TOKEN) or tokens is None:
        return None
    token = await tokens.by_id(key[len(_TOKEN) :])
    return principal_of(token, channel) if token is not None else None


@dataclass(frozen=True)
class Subscription:
    """One browser's Web Push subscription (the `PushSubscription` it handed the page)."""

    id: str
    #: The push service's URL for this browser (RFC 8030).
    endpoint: str
    #: The browser's P-256 public key and auth secret, base64url (RFC 8291).
    p256dh: str
    auth: str
    #: Whose it is: a principal's `requester` key.
    principal: str
    #: What the page said of the device ("Chrome on Android").
    label: str
    created_at: datetime


class Subscriptions(Protocol):
    """Where subscriptions are kept (`pizzabot.store.phone.SqlSubscriptions`)."""

    async def add(self, sub: Subscription, *, actor: str, channel: str) -> Subscription:
        """Keep `sub`, audited `push_subscribed`; the same endpoint again replaces the old
        row (a browser re-subscribing, or handed to another person), keeping its id."""
        ...

    async def get(self, sub_id: str) -> Subscription | None: ...

    async def list_subscriptions(self, principal: str | None = None) -> list[Subscription]:
        """Every subscription (of `principal`, when given), newest first."""
        ...

    async def remove(
        self, sub_id: str, *, actor: str, channel: str, why: str, now: datetime
    ) -> bool:
        """Forget a subscription, audited `push_unsubscribed` with `why`; False: it was gone."""
        ...

    async def fan_out(
        self, *, item_id: str, run_id: str, sub_ids: Sequence[str], now: datetime
    ) -> int:
        """A pending push delivery of the item to each subscription, in one transaction."""
        ...

    async def item_of(self, delivery_id: str) -> str | None:
        """The item a push delivery (the opaque id a push carries) was for; None: no such."""
        ...


@dataclass(frozen=True)
class StoredPasskey:
    """A registered passkey: its credential, the last signature counter it showed, whose."""

    id: str
    #: The credential id, base64url.
    credential_id: str
    #: The COSE public key, base64url.
    public_key: str
    sign_count: int
    principal: str
    name: str
    created_at: datetime
    last_used_at: datetime | None = None


@dataclass(frozen=True)
class Challenge:
    """An open WebAuthn ceremony: its random nonce, what for, and (register, step-up) who."""

    nonce: str
    purpose: str
    principal: str | None
    item_id: str | None
    expires_at: datetime


class PasskeyStore(Protocol):
    """Where passkeys and open ceremonies are kept (`pizzabot.store.phone.SqlPasskeys`). Each change
    that matters to security writes its audit entry in the same transaction."""

    async def add(self, key: StoredPasskey, *, actor: str, channel: str) -> StoredPasskey:
        """Keep a new passkey, audited `passkey_registered`; a credential id registered
        before is a `Conflict`."""
        ...

    async def by_credential(self, credential_id: str) -> StoredPasskey | None: ...

    async def list_passkeys(self, principal: str) -> list[StoredPasskey]: ...

    async def remove(
        self, passkey_id: str, *, principal: str, actor: str, channel: str, now: datetime
    ) -> bool:
        """Forget one of `principal`'s passkeys, audited `passkey_removed`."""
        ...

    async def used(self, passkey_id: str, *, was: int, now_count: int, at: datetime) -> bool:
        """Move the counter from `was` to `now_count` (and note the use); False when the
        counter was not `was` any more (a second use of the same assertion raced this one)."""
        ...

    async def open(self, challenge: Challenge, *, now: datetime) -> None:
        """Keep an open ceremony (and forget the ones that expired)."""
        ...

    async def take(self, nonce: str, *, purpose: str, now: datetime) -> Challenge | None:
        """The open ceremony `nonce` for `purpose`, deleted as it is read: a second take of
        the same nonce finds nothing. None for an unknown, expired or other-purpose nonce."""
        ...
