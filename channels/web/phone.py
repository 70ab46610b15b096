"""What the web page needs to be a phone's inbox: push subscriptions and passkeys.

`pizzabot.bot.wire_phone` makes a `PhoneDeps` and hands it to the page with the other services. The
pages that use it are `routes_phone` (installing the page, notifications) and
`routes_passkeys` (passkeys, signing in with one, confirming a card with one).
"""

from __future__ import annotations

from dataclasses import dataclass

from pizzabot.agent.devices import Subscriptions
from pizzabot.agent.passkeys import Passkeys

__all__ = ["PhoneDeps"]


@dataclass(frozen=True)
class PhoneDeps:
    #: Where the browsers' push subscriptions are kept.
    subscriptions: Subscriptions
    #: The server's VAPID public key (base64url), the page's `applicationServerKey`; "" when
    #: this server sends no push.
    vapid_key: str
    #: The passkey ceremonies; None when the page's address cannot have passkeys.
    passkeys: Passkeys | None
    #: Accept push services on loopback over plain http (a local push service in tests);
    #: otherwise only https endpoints, so the server posts to no local service for anyone.
    loopback_push: bool = False
