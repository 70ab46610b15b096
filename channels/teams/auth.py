"""The Bot Framework's two kinds of token: the one every inbound activity carries, checked here
as the Bot Framework requires, and the app's own, which every call to the connector carries.

Inbound (`BotFrameworkKeys.verify`): `Authorization: Bearer <JWT>`, signed RS256 by one of the
keys the Bot Framework publishes (its OpenID configuration names the JWKS), whose issuer is
`https://api.botframework.com`, whose audience is this bot's app id, within its lifetime (five
minutes of clock skew allowed), and carrying the `serviceurl` the activity must name. The key
must be endorsed for the channel the activity comes from (`msteams`). The keys are fetched
when first needed, again every day, and again (at most every five minutes) when a token names
a key not seen yet. PyJWT does the JWT work; nothing of it is done by hand.

Outbound (`AppToken`): the client-credentials grant of the app's id and secret at Microsoft's
token endpoint, for the scope `https://api.botframework.com/.default`, kept until shortly
before it expires.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

__all__ = ["ISSUER", "AppToken", "BotFrameworkKeys", "Caller", "TokenRefused"]

#: The issuer of every token the Bot Framework's channels send a bot.
ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
_SKEW = 300.0
_KEYS_TTL = 86_400.0
_REFETCH_GAP = 300.0


class TokenRefused(Exception):
    """An inbound token is missing, malformed, unsigned by a Bot Framework key, or for
    another bot; or the app's own token could not be had."""


@dataclass(frozen=True)
class Caller:
    """What a verified inbound token says: the service URL the activity must name, and the
    channels its signing key is endorsed for."""

    service_url: str
    endorsements: frozenset[str]


class BotFrameworkKeys:
    """Verifies inbound tokens for the bot `app_id`, with the keys of the OpenID
    configuration at `openid_url`."""

    def __init__(
        self,
        *,
        app_id: str,
        openid_url: str,
        client: httpx.AsyncClient,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app_id = app_id
        self.openid_url = openid_url
        self._client = client
        self._clock = clock
        self._keys: dict[str, tuple[jwt.PyJWK, frozenset[str]]] = {}
        self._fetched = 0.0
        self._lock = asyncio.Lock()

    async def verify(self, authorization: str | None) -> Caller:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise TokenRefused("no bearer token")
        try:
            header = jwt.get_unverified_header(token.strip())
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"not a JWT: {exc}") from None
        if header.get("alg") != "RS256":
            raise TokenRefused("not signed with RS256")
        key = await self._key(str(header.get("kid") or ""))
        try:
            claims: dict[str, Any] = jwt.decode(
                token.strip(),
                key=key[0].key,
                algorithms=["RS256"],
                audience=self.app_id,
                issuer=ISSUER,
                leeway=_SKEW,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise TokenRefused(str(exc)) from None
        service_url = claims.get("serviceurl") or claims.get("serviceUrl")
        if not isinstance(service_url, str) or not service_url:
            raise TokenRefused("the token names no service URL")
        return Caller(service_url=service_url, endorsements=key[1])

    async def _key(self, kid: str) -> tuple[jwt.PyJWK, frozenset[str]]:
        async with self._lock:
            now = self._clock()
            stale = now - self._fetched > _KEYS_TTL
            unknown = kid not in self._keys and now - self._fetched > _REFETCH_GAP
            if stale or unknown:
                await self._fetch()
                self._fetched = now
        found = self._keys.get(kid)
        if found is None:
            raise TokenRefused("signed by a key the Bot Framework does not publish")
        return found

    async def _fetch(self) -> None:
        try:
            config = (await self._client.get(self.openid_url)).raise_for_status().json()
            jwks = (await self._client.get(str(config["jwks_uri"]))).raise_for_status().json()
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise TokenRefused(f"the Bot Framework's keys could not be read: {exc}") from None
        keys: dict[str, tuple[jwt.PyJWK, frozenset[str]]] = {}
        for data in jwks.get("keys") or []:
            try:
                key = jwt.PyJWK(data, algorithm="RS256")
            except jwt.PyJWTError:
                continue
            endorsed = data.get("endorsements") or []
            keys[str(data.get("kid") or "")] = (key, frozenset(map(str, endorsed)))
        self._keys = keys


class AppToken:
    """The app's token for the connector, from `token_url` (client credentials)."""

    def __init__(
        self,
        *,
        app_id: str,
        secret: str,
        token_url: str,
        client: httpx.AsyncClient,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._form = {
            "grant_type": "client_credentials",
            "client_id": app_id,
            "client_secret": secret,
            "scope": SCOPE,
        }
        self._url = token_url
        self._client = client
        self._clock = clock
        self._token = ""
        self._until = 0.0
        self._lock = asyncio.Lock()

    async def get(self) -> str:
        async with self._lock:
            if self._token and self._clock() < self._until:
                return self._token
            try:
                response = await self._client.post(self._url, data=self._form)
                data = response.raise_for_status().json()
                token, lifetime = str(data["access_token"]), float(data.get("expires_in", 3600))
            except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                raise TokenRefused(f"no app token: {type(exc).__name__}") from None
            self._token, self._until = token, self._clock() + max(0.0, lifetime - _SKEW)
            return token

    def forget(self) -> None:
        """Drop the kept token (the connector refused it)."""
        self._token, self._until = "", 0.0
