"""Named tokens: one per agent or device, each with the least scope it needs.

The server's own API token is the owner's and may do everything. An agent that asks for
approval gets a token of its own with scope `ask`, so the credential that asks can never
decide; a phone or a teammate's CLI gets `decide`, naming the person it decides as; `admin`
is for automation that must do everything. (`pizzabot.agent.policy.principal` says what each scope
allows; `pizzabot.agent.policy.access` enforces it.)

A token's secret is shown once, when it is made, and kept only as its SHA-256: the secret is
32 random bytes, so a plain hash keeps a copy of the database from presenting it. A revoked
token is refused at once by every server sharing the database: each request looks its hash
up, nothing is cached. Making, listing and revoking tokens is for admins, audited
(`token_created`, `token_revoked`, and `tokens_refused` for anyone else).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pizzabot.agent.errors import InvalidArguments, NotAllowed, NotFound
from pizzabot.agent.policy.access import Access, audit_refusal
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.store import AuditTrail

__all__ = [
    "NewToken",
    "Token",
    "TokenDesk",
    "Tokens",
    "hash_secret",
    "principal_for",
    "principal_of",
]

#: What a token's secret starts with, so a leaked one is recognisable (secret scanners).
PREFIX = "pzb_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_PERSON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: A presented secret longer than any this server makes is nobody's (and is not hashed).
_MAX_SECRET = 200


def hash_secret(secret: str) -> str:
    """The SHA-256 (hex) a token's secret is kept and looked up as."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Token:
    """One named token, as listed (never with its secret)."""

    id: str
    name: str
    scope: Scope
    person: str | None
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None
    revoked_by: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class NewToken:
    """A token just made, with its secret: the only time the secret is seen."""

    token: Token
    secret: str


def principal_of(token: Token, channel: str = "api") -> Principal:
    """Who a request presenting `token` is."""
    return Principal.token(
        token_id=token.id, name=token.name, scope=token.scope, person=token.person, channel=channel
    )


async def principal_for(
    presented: str, *, owner_secret: str, tokens: Tokens | None, channel: str
) -> Principal | None:
    """Who presents `presented` as a bearer token through `channel`: the owner (the server's
    API token, compared in constant time), a named token that is not revoked, or nobody."""
    if owner_secret and hmac.compare_digest(presented.encode(), owner_secret.encode()):
        return Principal.owner(channel)
    if tokens is None or not presented.startswith(PREFIX) or len(presented) > _MAX_SECRET:
        return None
    token = await tokens.by_hash(hash_secret(presented))
    return principal_of(token, channel) if token is not None else None


class Tokens(Protocol):
    """Where tokens are kept (`pizzabot.store.tokens`). Each change writes its audit entry."""

    async def add(self, token: Token, *, secret_hash: str, channel: str) -> Token:
        """Keep a new token, audited `token_created`; a name in use by an active token is a
        `Conflict`."""
        ...

    async def by_hash(self, secret_hash: str) -> Token | None:
        """The active token with this secret's hash, or None."""
        ...

    async def by_id(self, token_id: str) -> Token | None:
        """The active token with this id, or None."""
        ...

    async def list_tokens(self) -> list[Token]:
        """Every token, newest first, revoked ones too."""
        ...

    async def revoke(self, token_id: str, *, actor: str, channel: str, now: datetime) -> Token:
        """Refuse the token from now on, audited `token_revoked`; a token revoked before is
        returned as it is. `NotFound` for an unknown id."""
        ...


class TokenDesk:
    """Making, listing and revoking tokens, for admins only (`Access.may_manage_tokens`)."""

    def __init__(
        self,
        *,
        tokens: Tokens,
        access: Access,
        trail: AuditTrail,
        clock: Callable[[], datetime],
        ids: Callable[[], str],
    ) -> None:
        self.tokens = tokens
        self.access = access
        self.trail = trail
        self.clock = clock
        self.ids = ids

    async def create(
        self, *, name: str, scope: Scope, person: str | None, by: Principal
    ) -> NewToken:
        """A new token with its secret (shown once). A `decide` token must name the person it
        decides as; an `ask` or `admin` token may name one (shown as who asked)."""
        await self._check(by, {"token": name})
        errors: dict[str, str] = {}
        if not _NAME.fullmatch(name):
            errors["name"] = (
                "1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        if person is not None and not _PERSON.fullmatch(person):
            errors["person"] = "a name from people: (letters, digits, '.', '_' or '-')"
        if scope is Scope.DECIDE and person is None:
            errors["person"] = "a decide token decides as a person: name one from people:"
        elif person is not None and "person" not in errors:
            unknown = self._unknown_person(person)
            if unknown:
                errors["person"] = unknown
        if errors:
            raise InvalidArguments(errors)
        secret = PREFIX + secrets.token_urlsafe(32)
        token = Token(
            id=self.ids(),
            name=name,
            scope=scope,
            person=person,
            created_at=self.clock(),
            created_by=by.actor,
        )
        kept = await self.tokens.add(token, secret_hash=hash_secret(secret), channel=by.channel)
        return NewToken(kept, secret)

    def _unknown_person(self, person: str) -> str | None:
        """Why `person` cannot be a token's person: `owner` is the server's own token (an admin
        token that names nobody acts as it), and any other name must be a person of a loaded
        skill's `people:`, or the token would decide as nobody, or as whoever is added later."""
        if person == "owner":
            return "owner is the server's own token: an admin token naming no person acts as it"
        known = sorted({name for skill in self.access.skills.all() for name in skill.people})
        if person in known:
            return None
        listed = ", ".join(known) if known else "no skill names any"
        return f"{person!r} is not in the people: of any loaded skill (people: {listed})"

    async def list_tokens(self, *, by: Principal) -> list[Token]:
        await self._check(by, {"list": True})
        return await self.tokens.list_tokens()

    async def revoke(self, token_id: str, *, by: Principal) -> Token:
        await self._check(by, {"revoke": token_id})
        try:
            return await self.tokens.revoke(
                token_id, actor=by.actor, channel=by.channel, now=self.clock()
            )
        except NotFound:
            raise NotFound(f"no token {token_id}") from None

    async def _check(self, by: Principal, detail: dict[str, object]) -> None:
        verdict = self.access.may_manage_tokens(by)
        if not verdict:
            await audit_refusal(self.trail, verdict, now=self.clock(), detail=dict(detail))
            raise NotAllowed(f"{by.describe()} may not manage tokens: {verdict.why}")
