"""Consents to connect an `auth: oauth` MCP server, kept where every process sees them.

The process that holds the run asks the consent and keeps its PKCE verifier, in memory only.
The service sends the person's browser back to the public URL, which may reach any server
process: that one records the code against the consent's `state` (`Consents.answer`), and the
holder, a server or a `pizzabot worker`, picks it up (`Consents.take`) and exchanges it. A
code is useless without the verifier, which never leaves the holder.

A state is single-use (answered once, taken once) and expires with its card; only its SHA-256
is kept (`state_key`). `pizzabot.store.mcp_consents.SqlConsents` keeps consents in the
database (every callback audited); `MemoryConsents` in one process, where there is none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = ["Consents", "MemoryConsents", "Pending", "Returned", "state_key"]


def state_key(state: str) -> str:
    """What a consent is kept under: the SHA-256 of its state, hex (the state is random)."""
    return hashlib.sha256(state.encode("utf-8", "replace")).hexdigest()


@dataclass(frozen=True)
class Pending:
    """A consent asked and not yet answered: for which skill's server, on which run."""

    skill: str
    server: str
    run_id: str | None = None


@dataclass(frozen=True)
class Returned:
    """What the service sent back: a code (and the issuer it names), or its refusal, a short
    token of letters and underscores ("no code" when it sent neither)."""

    code: str | None = None
    iss: str | None = None
    error: str | None = None


class Consents(Protocol):
    """Where consents wait for the service's answer."""

    async def open(
        self, key: str, pending: Pending, *, now: datetime, expires_at: datetime
    ) -> None:
        """Keep a consent under `key` until `expires_at` (and forget the expired ones)."""
        ...

    async def answer(self, key: str, returned: Returned, *, now: datetime) -> Pending | None:
        """Record the service's answer, once: None when no consent waits under `key` (never
        asked, answered before, or expired)."""
        ...

    async def take(self, key: str) -> Returned | None:
        """The answer to a consent, forgetting it (None: no answer yet)."""
        ...

    async def drop(self, key: str) -> None:
        """Forget a consent whose holder gave up."""
        ...


@dataclass
class _Kept:
    pending: Pending
    expires_at: datetime
    returned: Returned | None = None


class MemoryConsents:
    """`Consents` in one process: the callback must reach the process that asked."""

    def __init__(self) -> None:
        self._kept: dict[str, _Kept] = {}

    async def open(
        self, key: str, pending: Pending, *, now: datetime, expires_at: datetime
    ) -> None:
        for old in [k for k, v in self._kept.items() if v.expires_at <= now]:
            del self._kept[old]
        self._kept[key] = _Kept(pending, expires_at)

    async def answer(self, key: str, returned: Returned, *, now: datetime) -> Pending | None:
        kept = self._kept.get(key)
        if kept is None or kept.returned is not None or kept.expires_at <= now:
            return None
        kept.returned = returned
        return kept.pending

    async def take(self, key: str) -> Returned | None:
        kept = self._kept.get(key)
        if kept is None or kept.returned is None:
            return None
        del self._kept[key]
        return kept.returned

    async def drop(self, key: str) -> None:
        self._kept.pop(key, None)
