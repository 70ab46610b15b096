"""Signed session cookies and CSRF tokens for the web inbox, with nothing stored server-side.

The API token is the one secret the owner holds, so everything is derived from it: the
signing key is an HMAC of the token, a session is a random id plus its issue time signed
with that key, and a form's CSRF token is an HMAC of the session id. A new API token
therefore ends every session at once, and a CSRF token is useless without its cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

COOKIE = "pizzabot_session"
#: A session lasts this long after login; logging in again starts a new one.
MAX_AGE = 30 * 24 * 3600
_CLOCK_SKEW = 60


class Sessions:
    """Issue and check session cookies and CSRF tokens for one API token."""

    def __init__(self, token: str, *, clock: Callable[[], float] = time.time) -> None:
        self._token = token
        self._key = hmac.new(token.encode(), b"pizzabot web session v1", hashlib.sha256).digest()
        self._clock = clock

    def token_matches(self, given: str) -> bool:
        return bool(self._token) and _same(given, self._token)

    def issue(self) -> str:
        """A new cookie value: ``sid.issued.signature``."""
        body = f"{secrets.token_urlsafe(18)}.{int(self._clock())}"
        return f"{body}.{self._sign(body)}"

    def verify(self, cookie: str | None) -> str | None:
        """The session id of a valid, unexpired cookie; None for anything else."""
        if not cookie or cookie.count(".") != 2:
            return None
        sid, issued, signature = cookie.split(".")
        if not _same(signature, self._sign(f"{sid}.{issued}")):
            return None
        try:
            age = self._clock() - int(issued)
        except ValueError:
            return None
        if age > MAX_AGE or age < -_CLOCK_SKEW:
            return None
        return sid

    def csrf(self, sid: str) -> str:
        return self._sign(f"csrf:{sid}")

    def csrf_ok(self, sid: str, given: str | None) -> bool:
        return bool(given) and _same(str(given), self.csrf(sid))

    def _sign(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    # Bytes, because compare_digest refuses non-ASCII str and a cookie may hold anything.
    return hmac.compare_digest(a.encode(), b.encode())
