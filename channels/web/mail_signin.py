"""Signing in by a link in a mail, for a person a skill lists under `people:` with an address.

A person who holds no token still has to reach the page once to add a passkey: the login page
takes their address and mails them a link (`SignInMailer`, the mail channel). The page answers
the same whatever the address is, and mails nothing to one no skill lists, so it tells nobody
who is listed. The link:

- works **once** and for a short while (`TTL`): its secret is kept only as its SHA-256, as a
  one-time ceremony row (`Ceremonies`, the passkeys' challenge store: taken, that is deleted,
  by the one use that may have it), bound to the address it was mailed to;
- is made from the server's public URL, never from the request's Host header, so a forged
  Host cannot make the mail point elsewhere;
- signs in as that address (`Principal.by_mail`): the session may see and decide what the
  skills' lists let that address decide, for as long as a skill lists it.

Asking, signing in and a refused link are audited (`mail_signin_sent`, `mail_signin_unknown`,
`mail_signin`, `mail_signin_refused`); the link itself never is, nor logged.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from pizzabot.agent.context import utcnow
from pizzabot.agent.devices import Challenge
from pizzabot.agent.policy import Principal
from pizzabot.agent.policy.identity import normalize_address
from pizzabot.agent.skills import SkillBook
from pizzabot.agent.store import AuditTrail

__all__ = ["PURPOSE", "TTL", "Ceremonies", "MailSignIn", "SignInMailer", "listed_addresses"]

#: The ceremony row's purpose (the challenge store keeps passkeys' ceremonies too).
PURPOSE = "mail_signin"
#: Seconds a sign-in link works.
TTL = 900
_CHANNEL = "web"
_KEY = "web:"


class SignInMailer(Protocol):
    """Mails a sign-in link (`pizzabot.channels.email.EmailChannel`), in the background, with
    retries: the page does not wait for SMTP."""

    def send_signin(self, *, to: str, link: str, expires: datetime) -> None: ...


class Ceremonies(Protocol):
    """One-time rows with an expiry (`pizzabot.agent.devices.PasskeyStore`'s challenges)."""

    async def open(self, challenge: Challenge, *, now: datetime) -> None: ...

    async def take(self, nonce: str, *, purpose: str, now: datetime) -> Challenge | None: ...


def listed_addresses(skills: SkillBook) -> frozenset[str]:
    """Every address a loaded skill gives a person under `people:`, as compared."""
    found = (normalize_address(p.email) for s in skills.all() for p in s.people.values())
    return frozenset(a for a in found if a is not None)


def _hashed(secret: str) -> str:
    return hashlib.sha256(f"pizzabot mail sign-in\0{secret}".encode()).hexdigest()


@dataclass
class MailSignIn:
    """Mail sign-in links to the listed people, and sign them in by one. `base_url` is the
    server's public URL, where the link points."""

    skills: SkillBook
    ceremonies: Ceremonies
    trail: AuditTrail
    mailer: SignInMailer
    base_url: str
    ttl: float = TTL
    clock: Callable[[], datetime] = utcnow

    async def ask(self, given: str, *, client: str) -> None:
        """Mail a link to `given` when a skill lists it; else only audit the attempt. The
        caller answers the same either way."""
        now = self.clock()
        address = normalize_address(given)
        listed = address is not None and address in listed_addresses(self.skills)
        secret = secrets.token_urlsafe(32)
        expires = now + timedelta(seconds=self.ttl)
        # A row either way (one for nobody when the address is not listed, whose secret is
        # thrown away), so both answers cost the same and their timing tells nothing.
        row = Challenge(
            nonce=_hashed(secret),
            purpose=PURPOSE,
            principal=_KEY + address if listed and address else None,
            item_id=None,
            expires_at=expires,
        )
        await self.ceremonies.open(row, now=now)
        if not listed or address is None:
            await self._audit("mail_signin_unknown", "unknown", {"client": client})
            return
        link = f"{self.base_url.rstrip('/')}/login/mail?token={secret}"
        self.mailer.send_signin(to=address, link=link, expires=expires)
        await self._audit("mail_signin_sent", address, {"client": client})

    async def redeem(self, secret: str, *, client: str) -> Principal | None:
        """Who the link with `secret` signs in (audited), using it up; None when it was used,
        expired, never made, or its address is no longer listed."""
        now = self.clock()
        opened = await self.ceremonies.take(_hashed(secret), purpose=PURPOSE, now=now)
        key = opened.principal if opened is not None else None
        if key is None or not key.startswith(_KEY):
            why = "the link was used, has expired, or was never made"
            await self._audit("mail_signin_refused", "unknown", {"client": client, "why": why})
            return None
        address = key[len(_KEY) :]
        if address not in listed_addresses(self.skills):
            why = "no skill lists this address under people any more"
            await self._audit("mail_signin_refused", address, {"client": client, "why": why})
            return None
        await self._audit("mail_signin", address, {"client": client})
        return Principal.by_mail(address)

    async def _audit(self, action: str, actor: str, detail: dict[str, Any]) -> None:
        await self.trail.audit(
            action=action, actor=actor, channel=_CHANNEL, now=self.clock(), detail=detail
        )
