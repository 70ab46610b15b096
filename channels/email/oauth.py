"""OAuth 2.0 access tokens for mail (SASL XOAUTH2), from a refresh token.

Microsoft 365 no longer takes passwords over IMAP and SMTP, and Google prefers OAuth: the
bot holds a refresh token (made once, by a person consenting, see docs/email.md) and trades
it at the provider's token endpoint for short-lived access tokens:

    POST token_url  grant_type=refresh_token, client_id, client_secret, refresh_token, scope
      -> {"access_token": ..., "expires_in": 3599, ["refresh_token": <rotated>]}

`OAuthTokens.token()` answers from a cache until shortly before the token expires; one
refresh serves every caller waiting at that moment. A server that rejects a token gets one
fresh token (`invalidate`, then `token()` again), never a loop. A token endpoint that is
down, slow or rate-limiting (transport errors, 429, 5xx) is retried with exponential
backoff (tenacity, as `pizzabot.agent.llm` retries models); a refusal (400/401: revoked or expired
refresh token, wrong client secret) is not retried, and says what to fix.

Errors:

    OAuthError              the token could not be had
    └── OAuthRefused        the provider refused the grant: a configuration problem

No secret (client secret, refresh or access token) is ever logged or put in an error:
messages carry only the provider's `error` code and description.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

log = logging.getLogger(__name__)

Provider = Literal["google", "microsoft", "custom"]

GOOGLE_TOKEN_URL = "https://oauth2.googleapis.com/token"
MICROSOFT_TOKEN_URL = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
#: Gmail's one scope for IMAP and SMTP.
GOOGLE_SCOPE = "https://mail.google.com/"
#: Exchange Online's delegated IMAP and SMTP scopes; offline_access keeps refresh tokens coming.
MICROSOFT_SCOPE = (
    "https://outlook.office.com/IMAP.AccessAsUser.All "
    "https://outlook.office.com/SMTP.Send offline_access"
)


class OAuthError(Exception):
    """No access token: the token endpoint was unreachable or answered nonsense."""


class OAuthRefused(OAuthError):
    """The provider refused the refresh token or the client: fix the configuration."""


@dataclass(frozen=True)
class OAuthConfig:
    token_url: str
    client_id: str
    refresh_token: str = ""
    client_secret: str | None = None  # Microsoft public clients have none
    scope: str | None = None
    #: Refresh this many seconds before the provider's expiry (clock skew, slow logins).
    margin: float = 300.0
    timeout: float = 30.0
    attempts: int = 4
    backoff: tuple[float, float] = (1.0, 30.0)

    def __repr__(self) -> str:  # the dataclass default would print the secrets
        return f"OAuthConfig(token_url={self.token_url!r}, client_id={self.client_id!r})"


def provider_defaults(provider: Provider, *, tenant: str | None = None) -> tuple[str | None, str]:
    """(token URL, scope) for a known provider; `custom` has neither.

    Microsoft's URL names the tenant (the directory ID, or the domain); a single-tenant
    app registration cannot use `common`.
    """
    if provider == "google":
        return GOOGLE_TOKEN_URL, GOOGLE_SCOPE
    if provider == "microsoft":
        url = MICROSOFT_TOKEN_URL.format(tenant=tenant) if tenant else None
        return url, MICROSOFT_SCOPE
    return None, ""


class _Transient(Exception):
    """A token-endpoint failure worth another try (kept inside this module)."""


class OAuthTokens:
    """Access tokens for one mailbox, cached and refreshed; shared by IMAP and SMTP."""

    def __init__(
        self,
        config: OAuthConfig,
        *,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        on_refresh_token: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self._client = client
        self._clock = clock
        self._sleep = sleep
        self._on_refresh_token = on_refresh_token
        self._refresh_token = config.refresh_token
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()

    async def token(self) -> str:
        """A valid access token, refreshing it first when it is missing or about to expire."""
        async with self._lock:
            if self._token is None or self._clock() >= self._expires - self.config.margin:
                await self._refresh()
            assert self._token is not None
            return self._token

    def invalidate(self, token: str) -> None:
        """A server refused `token`: the next `token()` fetches a new one.

        Only that token is dropped, so a refusal that arrives after another caller already
        refreshed does not throw the fresh token away.
        """
        if token == self._token:
            self._token = None

    async def _refresh(self) -> None:
        c = self.config
        form = {
            "grant_type": "refresh_token",
            "client_id": c.client_id,
            "refresh_token": self._refresh_token,
        }
        if c.client_secret:
            form["client_secret"] = c.client_secret
        if c.scope:
            form["scope"] = c.scope
        retry_kwargs: dict[str, Any] = {}
        if self._sleep is not None:
            retry_kwargs["sleep"] = self._sleep
        retrying = AsyncRetrying(
            stop=stop_after_attempt(c.attempts),
            wait=wait_exponential(min=c.backoff[0], max=c.backoff[1]),
            retry=retry_if_exception_type(_Transient),
            reraise=True,
            **retry_kwargs,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    body = await self._post(form)
        except _Transient as exc:
            raise OAuthError(f"token endpoint failed {c.attempts} times: {exc}") from None
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuthError("the token endpoint's answer has no access_token")
        try:
            lifetime = float(str(body.get("expires_in", 3600)))
        except ValueError:
            lifetime = 3600.0
        self._token = token
        self._expires = self._clock() + lifetime
        rotated = body.get("refresh_token")
        if isinstance(rotated, str) and rotated and rotated != self._refresh_token:
            # Microsoft hands out a new refresh token with each use; the newest one lives longest.
            self._refresh_token = rotated
            if self._on_refresh_token is not None:
                self._on_refresh_token(rotated)
        log.info("OAuth: new access token from %s, valid %.0fs", c.token_url, lifetime)

    async def _post(self, form: dict[str, str]) -> dict[str, object]:
        c = self.config
        try:
            if self._client is not None:
                answer = await self._client.post(c.token_url, data=form, timeout=c.timeout)
            else:
                async with httpx.AsyncClient(timeout=c.timeout) as client:
                    answer = await client.post(c.token_url, data=form)
        except httpx.TransportError as exc:
            log.warning("OAuth: token endpoint %s unreachable: %s", c.token_url, exc)
            raise _Transient(f"{type(exc).__name__}: {exc}") from None
        if answer.status_code == 429 or answer.status_code >= 500:
            log.warning("OAuth: token endpoint %s said %s", c.token_url, answer.status_code)
            raise _Transient(f"HTTP {answer.status_code}")
        try:
            body = answer.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise OAuthError(f"token endpoint answered HTTP {answer.status_code} without JSON")
        if answer.status_code != 200:
            raise OAuthRefused(_refusal(answer.status_code, body))
        return body


def _refusal(status: int, body: dict[str, object]) -> str:
    error = str(body.get("error") or f"HTTP {status}")[:100]
    description = str(body.get("error_description") or "")[:300]
    hint = {
        "invalid_grant": "the refresh token was revoked or has expired: make a new one",
        "invalid_client": "the client ID or secret is wrong (or the secret has expired)",
        "unauthorized_client": "this client may not use the refresh-token grant",
        "invalid_scope": "the scope is not granted to this client",
    }.get(error)
    parts = [f"the provider refused the token request: {error}"]
    if description:
        parts.append(description.splitlines()[0])
    if hint:
        parts.append(hint)
    return "; ".join(parts)
