"""Plugs the phone into the server: Web Push (`pizzabot.channels.push`, on unless
`PIZZABOT_PUSH=false`) and passkeys. The VAPID key is made at first start and kept in the
data folder (`vapid-key.pem`, 0600), so subscriptions survive restarts and every server
sharing the folder signs alike. Passkeys need a host name a browser binds them to
(`pizzabot.agent.passkeys.relying_party`); they also check step-up approvals
(`pizzabot.agent.step_up`), so the engine's context gets them.
"""

from __future__ import annotations

from pizzabot.agent.passkeys import Passkeys, relying_party
from pizzabot.agent.policy.access import Access
from pizzabot.bot.settings import Settings
from pizzabot.channels.push import KEY_FILE, PushChannel, VapidKey, vapid_contact
from pizzabot.channels.web.phone import PhoneDeps
from pizzabot.store.phone import SqlPasskeys, SqlSubscriptions
from pizzabot.store.sql import SqlStore
from pizzabot.store.tokens import SqlTokens

__all__ = ["build", "outlet"]


def outlet(settings: Settings, *, store: SqlStore, access: Access) -> PushChannel | None:
    """The push channel the outbox delivers on; None when push is off."""
    if not settings.push:
        return None
    contact = vapid_contact(contact=settings.push_contact, base_url=settings.base_url)
    key = VapidKey.load_or_create(settings.data_dir / KEY_FILE, contact=contact)
    subscriptions, tokens = SqlSubscriptions(store.db), SqlTokens(store.db)
    return PushChannel(subscriptions=subscriptions, access=access, tokens=tokens, key=key)


def build(settings: Settings, push: PushChannel | None, *, store: SqlStore) -> PhoneDeps:
    """What the web page needs: subscriptions, the VAPID public key ("" without `push`),
    and the passkey ceremonies where the page's address can have passkeys."""
    site = relying_party(settings.base_url, rp_id=settings.passkey_rp_id)
    passkeys = None
    if site is not None:
        keys, tokens = SqlPasskeys(store.db), SqlTokens(store.db)
        passkeys = Passkeys(store=keys, trail=store, tokens=tokens, rp_id=site[0], origins=site[1])
    return PhoneDeps(
        subscriptions=SqlSubscriptions(store.db),
        vapid_key=push.key.public_key if push is not None else "",
        passkeys=passkeys,
        loopback_push=settings.push_loopback,
    )
