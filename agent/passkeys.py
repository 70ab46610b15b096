"""Passkeys: the WebAuthn relying party that signs a person in and confirms risky approvals.

Three ceremonies, each with a one-time challenge kept by the server (`PasskeyStore.open`,
then `take`n by the one verification that may use it):

- **register**: a signed-in person (the owner, or a named token's person) adds a passkey. It
  belongs to that principal (`pizzabot.agent.devices`), is discoverable (so it can sign in
  with no name typed) and must verify its user (a PIN, a fingerprint, a face).
- **login**: a passkey alone signs its principal in. A passkey of a token that was revoked
  signs nobody in.
- **step-up**: a fresh assertion for one card (`pizzabot.agent.step_up`): its challenge is derived
  from the card's digest and the nonce, so it confirms that card as it was shown, once, and
  only for the principal that decides.

Every assertion's signature counter must move forward. A counter that stays or goes back
means two authenticators hold the same key (a cloned one): it is refused and audited
(`passkey_counter_refused`), and the stored counter moves by a conditional update, so one
assertion cannot be used twice at once either. Logins are audited (`passkey_login`,
`passkey_login_refused`); a step-up's outcome is audited by the inbox.

The relying party's id is the page's host name and the origins its addresses
(`relying_party`, from the public URL): a browser signs only for the site it is on, so a
passkey made here cannot be used for any other site, nor another's for this one.

The `webauthn` library (~7 MiB resident) is imported by the first ceremony, not with this
module: a server whose people never use a passkey does not carry it.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import secrets
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from pizzabot.agent.context import new_id, utcnow
from pizzabot.agent.devices import Challenge, PasskeyStore, StoredPasskey, holder
from pizzabot.agent.errors import PasskeyRefused
from pizzabot.agent.model import Item
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.tokens import Tokens
from pizzabot.agent.step_up import Assertion, challenge_for
from pizzabot.agent.store import AuditTrail

__all__ = ["Passkeys", "relying_party"]

#: Seconds a ceremony's challenge stays usable.
_TTL = 300
_NAME_MAX = 60


_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def relying_party(base_url: str, *, rp_id: str | None = None) -> tuple[str, list[str]] | None:
    """The passkeys' relying party id (`rp_id` if given, else the host name of `base_url`,
    the page's address) and the page's origins; None where the page's address cannot have
    passkeys (a bare IP address that is not this computer's)."""
    parts = urlsplit(base_url)
    if rp_id:
        return rp_id, [f"{parts.scheme}://{parts.netloc}"]
    host = parts.hostname or ""
    if host in _LOOPBACK:
        # A browser binds no passkey to an IP address: on this computer, localhost.
        port = f":{parts.port}" if parts.port else ""
        return "localhost", [f"{parts.scheme}://localhost{port}"]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host, [f"{parts.scheme}://{parts.netloc}"]
    return None


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _plain(purpose: str, nonce: str) -> bytes:
    """The challenge of a registration or a login: the nonce, bound to what it is for."""
    return hashlib.sha256(f"pizzabot {purpose}\0{nonce}".encode()).digest()


class Passkeys:
    """The ceremonies, over `store`, for the site `rp_id` reached at `origins`."""

    def __init__(
        self,
        *,
        store: PasskeyStore,
        trail: AuditTrail,
        tokens: Tokens | None,
        rp_id: str,
        origins: Sequence[str],
        rp_name: str = "Pizza Bot",
        channel: str = "web",
        clock: Callable[[], datetime] = utcnow,
        ids: Callable[[], str] = new_id,
    ) -> None:
        self.store = store
        self.trail = trail
        self.tokens = tokens
        self.rp_id = rp_id
        self.origins = list(origins)
        self.rp_name = rp_name
        self.channel = channel
        self._clock = clock
        self._ids = ids

    # -- register ----------------------------------------------------------------------------

    async def register_options(self, who: Principal) -> dict[str, Any]:
        """The options `navigator.credentials.create` takes, and the nonce to send back."""
        from webauthn import generate_registration_options
        from webauthn.helpers import options_to_json_dict
        from webauthn.helpers.structs import (
            AuthenticatorSelectionCriteria,
            PublicKeyCredentialDescriptor,
            ResidentKeyRequirement,
            UserVerificationRequirement,
        )

        nonce = await self._open("register", who.requester)
        mine = await self.store.list_passkeys(who.requester)
        options = generate_registration_options(
            rp_id=self.rp_id,
            rp_name=self.rp_name,
            user_name=who.actor,
            user_display_name=who.describe(),
            user_id=hashlib.sha256(f"pizzabot user\0{who.requester}".encode()).digest()[:16],
            challenge=_plain("register", nonce),
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
            exclude_credentials=[
                PublicKeyCredentialDescriptor(id=_unb64(k.credential_id)) for k in mine
            ],
        )
        return {"options": options_to_json_dict(options), "nonce": nonce}

    async def register(
        self, who: Principal, *, nonce: str, credential: str, name: str
    ) -> StoredPasskey:
        """Keep the passkey `credential` made for the challenge `nonce`, as `who`'s."""
        from webauthn import verify_registration_response

        now = self._clock()
        opened = await self.store.take(nonce, purpose="register", now=now)
        if opened is None or opened.principal != who.requester:
            raise PasskeyRefused("this registration expired or was not started here: try again")
        try:
            made = verify_registration_response(
                credential=credential,
                expected_challenge=_plain("register", nonce),
                expected_rp_id=self.rp_id,
                expected_origin=self.origins,
                require_user_verification=True,
            )
        except Exception as exc:
            raise PasskeyRefused(f"the new passkey was not accepted: {exc}") from exc
        key = StoredPasskey(
            id=self._ids(),
            credential_id=_b64(made.credential_id),
            public_key=_b64(made.credential_public_key),
            sign_count=made.sign_count,
            principal=who.requester,
            name=" ".join(name.split())[:_NAME_MAX] or "Passkey",
            created_at=now,
        )
        return await self.store.add(key, actor=who.actor, channel=who.channel)

    # -- login -------------------------------------------------------------------------------

    async def login_options(self) -> dict[str, Any]:
        """Options for `navigator.credentials.get` with any of this site's passkeys."""
        from webauthn import generate_authentication_options
        from webauthn.helpers import options_to_json_dict
        from webauthn.helpers.structs import UserVerificationRequirement

        nonce = await self._open("login", None)
        options = generate_authentication_options(
            rp_id=self.rp_id,
            challenge=_plain("login", nonce),
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        return {"options": options_to_json_dict(options), "nonce": nonce}

    async def login(self, *, nonce: str, credential: str, client: str) -> Principal:
        """Who the passkey that answered the challenge `nonce` belongs to (audited either
        way); `PasskeyRefused` when it is not a good answer."""
        now = self._clock()
        try:
            opened = await self.store.take(nonce, purpose="login", now=now)
            if opened is None:
                raise PasskeyRefused("this sign-in expired or was used: try again")
            key = await self._key(credential)
            await self._check(key, credential, _plain("login", nonce))
            who = await holder(key.principal, tokens=self.tokens, channel=self.channel)
            if who is None:
                raise PasskeyRefused("the token this passkey belongs to was revoked")
        except PasskeyRefused as exc:
            detail = {"client": client, "why": str(exc)}
            await self._audit("passkey_login_refused", "unknown", detail)
            raise
        await self._audit("passkey_login", who.actor, {"passkey": key.id, "name": key.name})
        return who

    # -- step-up -----------------------------------------------------------------------------

    async def step_up_options(self, who: Principal, item: Item, *, digest: str) -> dict[str, Any]:
        """Options to confirm the card of `item` whose digest is `digest` with one of `who`'s
        passkeys."""
        from webauthn import generate_authentication_options
        from webauthn.helpers import options_to_json_dict
        from webauthn.helpers.structs import (
            PublicKeyCredentialDescriptor,
            UserVerificationRequirement,
        )

        mine = await self.store.list_passkeys(who.requester)
        if not mine:
            raise PasskeyRefused("you have no passkey yet: add one on the Phone page first")
        nonce = await self._open("step_up", who.requester, item.id)
        options = generate_authentication_options(
            rp_id=self.rp_id,
            challenge=challenge_for(item_id=item.id, digest=digest, nonce=nonce),
            allow_credentials=[
                PublicKeyCredentialDescriptor(id=_unb64(k.credential_id)) for k in mine
            ],
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        return {"options": options_to_json_dict(options), "nonce": nonce}

    async def confirm(self, item: Item, *, digest: str, by: Principal, assertion: Assertion) -> str:
        """`pizzabot.agent.step_up.Confirmer`: the name of `by`'s passkey that signed this card's
        challenge; `PasskeyRefused` for anything else (the inbox audits it)."""
        opened = await self.store.take(assertion.nonce, purpose="step_up", now=self._clock())
        if opened is None or opened.item_id != item.id or opened.principal != by.requester:
            raise PasskeyRefused("this confirmation expired, was used, or is for another card")
        key = await self._key(assertion.credential)
        if key.principal != by.requester:
            raise PasskeyRefused("this passkey belongs to someone else")
        challenge = challenge_for(item_id=item.id, digest=digest, nonce=assertion.nonce)
        await self._check(key, assertion.credential, challenge)
        return key.name

    # -- shared ------------------------------------------------------------------------------

    async def _open(self, purpose: str, principal: str | None, item_id: str | None = None) -> str:
        now = self._clock()
        nonce = secrets.token_urlsafe(32)
        challenge = Challenge(
            nonce=nonce,
            purpose=purpose,
            principal=principal,
            item_id=item_id,
            expires_at=now + timedelta(seconds=_TTL),
        )
        await self.store.open(challenge, now=now)
        return nonce

    async def _key(self, credential: str) -> StoredPasskey:
        from webauthn.helpers import parse_authentication_credential_json

        try:
            parsed = parse_authentication_credential_json(credential)
        except Exception as exc:
            raise PasskeyRefused("the browser's answer could not be read") from exc
        key = await self.store.by_credential(_b64(parsed.raw_id))
        if key is None:
            raise PasskeyRefused("this passkey is not registered here")
        return key

    async def _check(self, key: StoredPasskey, credential: str, challenge: bytes) -> None:
        """The assertion is `key`'s signature over `challenge` from this site, with its user
        verified and its counter moved forward (the stored counter follows)."""
        from webauthn import verify_authentication_response

        try:
            verified = verify_authentication_response(
                credential=credential,
                expected_challenge=challenge,
                expected_rp_id=self.rp_id,
                expected_origin=self.origins,
                credential_public_key=_unb64(key.public_key),
                credential_current_sign_count=0,  # compared below, once the signature holds
                require_user_verification=True,
            )
        except Exception as exc:
            raise PasskeyRefused(f"the passkey's answer does not hold: {exc}") from exc
        count = verified.new_sign_count
        if (count > 0 or key.sign_count > 0) and count <= key.sign_count:
            why = f"its counter went from {key.sign_count} to {count}: a cloned authenticator?"
            await self._audit("passkey_counter_refused", "unknown", {"passkey": key.id, "why": why})
            raise PasskeyRefused(f"this passkey's {why}")
        if not await self.store.used(key.id, was=key.sign_count, now_count=count, at=self._clock()):
            raise PasskeyRefused("this passkey was used twice at once")

    async def _audit(self, action: str, actor: str, detail: dict[str, Any]) -> None:
        await self.trail.audit(
            action=action,
            actor=actor,
            channel=self.channel,
            now=self._clock(),
            detail=detail,
        )
