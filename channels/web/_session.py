"""Signed session cookies, CSRF tokens and the failed-login throttle of the web inbox.

The API token is the one secret the owner holds, so everything is derived from it: a session
is a random id signed with its issue time by itsdangerous (`TimestampSigner`, HMAC-SHA256,
keyed from the token), and a form's CSRF token is a signature of the session id under another
salt. A new API token therefore ends every session at once, and a CSRF token is useless
without its cookie. A person may also sign in with a named token of scope `decide` or
`admin` (`pizzabot.agent.policy.tokens`): the session id then ends with that token's id, and the
session acts as that token's principal for as long as the token is not revoked. A person who
signed in by a link mailed to them (`pizzabot.channels.web.mail_signin`) has a session id that
ends with a digest of their address (a dash, then 22 base64url characters: a token id has no
dash), and acts as the address a loaded skill lists under `people:` with that digest, for as
long as one does (`mailed_digest`).

A living session is stored nowhere; an ended one is (`SessionEnds`, in the database): logout
must stop a copied cookie, which no signature can do on its own.

Failed logins are counted per client address in this process (`LoginThrottle`): past the
limit the client is told to wait (429) and its attempts are neither checked nor audited one by
one, so guessing is slow and cannot flood the audit log.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from itsdangerous import BadSignature, Signer, TimestampSigner

COOKIE = "pizzabot_session"
#: A session lasts this long after login; logging in again starts a new one.
MAX_AGE = 30 * 24 * 3600
#: Servers sharing a database may disagree on the time by this much: a cookie another server
#: issued a moment "from the future" is still good.
_CLOCK_SKEW = 60
#: A cookie and a CSRF token as they are made: base64url parts joined by dots. Python's
#: base64 decoder skips characters outside its alphabet, so without this check a signed value
#: with stray characters appended would still pass.
_SIGNED = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
#: A session id's random part: `secrets.token_urlsafe(18)` is always 24 characters.
_SID_CHARS = 24
#: What starts the tail of a mail link's session id (a token id is hex: never a dash).
_MAILED = "-"


class _ClockedSigner(TimestampSigner):
    """itsdangerous' timestamp signer on an injected clock, so tests can age a cookie."""

    def __init__(self, secret: str, *, salt: str, clock: Callable[[], float]) -> None:
        super().__init__(secret, salt=salt, key_derivation="hmac", digest_method=hashlib.sha256)
        self._clock = clock

    def get_timestamp(self) -> int:
        return int(self._clock())


class Sessions:
    """Issue and check session cookies and CSRF tokens for one API token."""

    def __init__(self, token: str, *, clock: Callable[[], float] = time.time) -> None:
        self._token = token
        self._clock = clock
        self._cookies = _ClockedSigner(token, salt="pizzabot web session", clock=clock)
        self._csrf = Signer(
            token,
            salt="pizzabot web csrf",
            key_derivation="hmac",
            digest_method=hashlib.sha256,
        )

    def token_matches(self, given: str) -> bool:
        # Bytes, because compare_digest refuses non-ASCII str and a form may hold anything.
        return bool(self._token) and secrets.compare_digest(given.encode(), self._token.encode())

    def issue(self, token_id: str | None = None, *, mailed: str | None = None) -> str:
        """A new cookie value: a random session id (for a named token's login, followed by
        the token's id; for a mail link's, by the address), its issue time and their signature."""
        tail = (_MAILED + address_digest(mailed)) if mailed else (token_id or "")
        sid = secrets.token_urlsafe(18) + tail
        return self._cookies.sign(sid).decode()

    def verify(self, cookie: str | None) -> str | None:
        """The session id of a valid, unexpired cookie; None for anything else (a cookie of
        another format, such as one signed before sessions used itsdangerous, included)."""
        if not cookie or not _SIGNED.fullmatch(cookie):
            return None
        try:
            sid, signed_at = self._cookies.unsign(cookie, return_timestamp=True)
        except BadSignature:
            return None
        age = self._clock() - signed_at.timestamp()
        if age > MAX_AGE or age < -_CLOCK_SKEW:
            return None
        return sid.decode()

    def csrf(self, sid: str) -> str:
        return self._csrf.get_signature(sid).decode()

    def csrf_ok(self, sid: str, given: str | None) -> bool:
        if not given or not _SIGNED.fullmatch(given):
            return False
        return self._csrf.verify_signature(sid, given)


def token_of(sid: str) -> str | None:
    """The id of the named token a session was signed in with; None: the API token's (or a
    mail link's, `mailed_of`)."""
    tail = sid[_SID_CHARS:]
    return tail if tail and not tail.startswith(_MAILED) else None


def address_digest(address: str) -> str:
    """What a mail link's session id holds of its address: short enough for the stored id of
    an ended session, and naming one address among the listed ones."""
    raw = hashlib.sha256(f"pizzabot web person\0{address}".encode()).digest()[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def mailed_digest(sid: str) -> str | None:
    """The address digest of a session signed in by a mail link; None for any other."""
    tail = sid[_SID_CHARS:]
    return tail[len(_MAILED) :] if tail.startswith(_MAILED) else None


class SessionEnds(Protocol):
    """Where ended sessions are remembered (`pizzabot.store.web_sessions.SqlSessionEnds`)."""

    async def end(self, sid: str, *, expires_at: datetime, now: datetime) -> None: ...

    async def ended(self, sid: str) -> bool: ...


class LoginThrottle:
    """Failed logins per client: `max_failures` within `window` seconds, then wait.

    The count starts at a client's first failure and is forgotten `window` seconds later (or at
    a successful login); while a client is over the limit, `retry_after` says how long it has
    left. At most `max_clients` are tracked: the least recently seen is forgotten first, so a
    flood of addresses costs bounded memory.
    """

    def __init__(
        self,
        *,
        max_failures: int = 10,
        window: float = 300.0,
        clock: Callable[[], float] = time.time,
        max_clients: int = 10_000,
    ) -> None:
        self.max_failures = max_failures
        self.window = window
        self._clock = clock
        self._max_clients = max_clients
        self._failures: OrderedDict[str, tuple[float, int]] = OrderedDict()  # first at, count

    def retry_after(self, client: str) -> int:
        """Whole seconds the client must wait before its next try; 0 when it may try now."""
        entry = self._current(client)
        if entry is None or entry[1] < self.max_failures:
            return 0
        return max(1, math.ceil(entry[0] + self.window - self._clock()))

    def failed(self, client: str) -> bool:
        """Count a failure; True when it is the one that reaches the limit."""
        first, count = self._current(client) or (self._clock(), 0)
        self._failures[client] = (first, count + 1)
        self._failures.move_to_end(client)
        while len(self._failures) > self._max_clients:
            self._failures.popitem(last=False)
        return count + 1 == self.max_failures

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)

    def _current(self, client: str) -> tuple[float, int] | None:
        entry = self._failures.get(client)
        if entry is not None and self._clock() - entry[0] >= self.window:
            del self._failures[client]
            return None
        return entry
