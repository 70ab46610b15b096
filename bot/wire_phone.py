"""Plugs the phone into the server: the Web Push channel (channels/push) and passkeys.

- **Push** is on unless `PIZZABOT_PUSH=false`. The VAPID key pair is made at first start and
  kept in the data folder (`vapid-key.pem`, 0600), so subscriptions survive restarts and
  every server process sharing the folder signs alike. The push channel is one of the
  outbox's channels; items are addressed to it wherever push is on (`reaches`).
- **Passkeys** need a host name the browser can bind them to: the public URL's
  (`PIZZABOT_PUBLIC_URL`), or `localhost` for a server on this computer (then the page must
  be opened as http://localhost:PORT). A public URL on a bare IP address has none. The
  passkey ceremonies also check step-up approvals (`pizzabot.agent.step_up`), so they are
  handed to the engine's context.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from pizzabot.agent.passkeys import Passkeys
from pizzabot.agent.policy.access import Access
from pizzabot.bot.settings import Settings
from pizzabot.channels.push import KEY_FILE, PushChannel, VapidKey
from pizzabot.channels.web.phone import PhoneDeps
from pizzabot.store.phone import SqlPasskeys, SqlSubscriptions
from pizzabot.store.sql import SqlStore
from pizzabot.store.tokens import SqlTokens

__all__ = ["Phone", "build", "reaches", "relying_party"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class Phone:
    #: The push channel the outbox delivers on; None when push is off.
    channel: PushChannel | None
    #: What the web page needs (subscriptions, the VAPID public key, passkeys).
    deps: PhoneDeps


def reaches(settings: Settings) -> bool:
    """Whether items are addressed to subscribed browsers."""
    return settings.push


def build(settings: Settings, *, store: SqlStore, access: Access) -> Phone:
    tokens = SqlTokens(store.db)
    subscriptions = SqlSubscriptions(store.db)
    channel: PushChannel | None = None
    if settings.push:
        key = VapidKey.load_or_create(settings.data_dir / KEY_FILE, contact=_contact(settings))
        channel = PushChannel(subscriptions=subscriptions, access=access, tokens=tokens, key=key)
    passkeys = None
    site = relying_party(settings)
    if site is not None:
        rp_id, origins = site
        passkeys = Passkeys(
            store=SqlPasskeys(store.db), trail=store, tokens=tokens, rp_id=rp_id, origins=origins
        )
    deps = PhoneDeps(
        subscriptions=subscriptions,
        vapid_key=channel.key.public_key if channel is not None else "",
        passkeys=passkeys,
        loopback_push=settings.push_loopback,
    )
    return Phone(channel=channel, deps=deps)


def _contact(settings: Settings) -> str:
    """Where a push service can reach whoever runs the server (VAPID's `sub`): the setting,
    else the public URL where it is https (push services take mailto: and https: only)."""
    if settings.push_contact:
        return settings.push_contact
    base = settings.base_url
    return base if base.startswith("https://") else "mailto:pizzabot@localhost"


def relying_party(settings: Settings) -> tuple[str, list[str]] | None:
    """The passkeys' relying party id and the page's origins; None where the page's address
    cannot have passkeys (a bare IP address that is not this computer's)."""
    if settings.passkey_rp_id:
        parts = urlsplit(settings.base_url)
        return settings.passkey_rp_id, [f"{parts.scheme}://{parts.netloc}"]
    parts = urlsplit(settings.base_url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    if host in _LOOPBACK:
        # A browser binds no passkey to an IP address: on this computer, localhost.
        return "localhost", [f"{parts.scheme}://localhost{port}"]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host, [f"{parts.scheme}://{parts.netloc}"]
    return None
