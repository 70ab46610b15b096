"""The tokens of a skill's `auth: oauth` MCP server: kept in a file, and revoked at the service.

    TokenFiles          the SDK's `TokenStorage` on one JSON file (0600, written whole), with
                        the service's revocation endpoint learnt at the consent
    revoke_at_service   RFC 7009: the refresh and access tokens sent to that endpoint, with
                        the client authentication the token endpoint takes

Nothing the service answers is repeated beyond its status and a short error token.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK takes seconds to import: load it on the first connection
    from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

__all__ = ["Connected", "TokenFiles", "revoke_at_service"]

#: Seconds the revocation endpoint has to answer.
REVOKE_TIMEOUT = 15.0

_ERROR = re.compile(r"^[A-Za-z_]{1,40}$")


class TokenFiles:
    """The SDK's `TokenStorage` for one skill and server: one JSON file, 0600."""

    def __init__(self, path: Path, *, preset: OAuthClientInformationFull | None = None) -> None:
        self.path = path
        #: The skill's pre-registered client, used while the file holds none.
        self.preset = preset

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)  # whole or not at all

    async def get_tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken

        raw = self.read().get("tokens")
        return OAuthToken.model_validate(raw) if isinstance(raw, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self.read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["saved_at"] = time.time()
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull

        raw = self.read().get("client")
        if isinstance(raw, dict):
            return OAuthClientInformationFull.model_validate(raw)
        return self.preset

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self.read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)

    def set_service(self, metadata: OAuthMetadata | None) -> None:
        """Keep where the tokens are revoked (from the authorization server's metadata)."""
        data = self.read()
        endpoint = metadata.revocation_endpoint if metadata is not None else None
        data["revocation_endpoint"] = str(endpoint) if endpoint is not None else None
        self._write(data)

    def expires_at(self) -> float | None:
        """When the stored access token expires (None: unknown, or no token)."""
        data = self.read()
        tokens, saved = data.get("tokens"), data.get("saved_at")
        if not isinstance(tokens, dict) or not isinstance(saved, (int, float)):
            return None
        expires_in = tokens.get("expires_in")
        return saved + expires_in if isinstance(expires_in, (int, float)) else None


@dataclass(frozen=True)
class Connected:
    """A skill's server that holds tokens (what `pizzabot mcp-auth list` shows; no secret)."""

    skill: str
    server: str
    scopes: list[str]
    expires_at: float | None
    refreshable: bool


def _client_auth(
    client: dict[str, Any], form: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The form and headers of a request authenticated as the token endpoint is (RFC 7009
    section 2.1): HTTP Basic, a secret in the form, or the public client's ID."""
    import base64
    from urllib.parse import quote

    client_id, secret = client.get("client_id"), client.get("client_secret")
    method = client.get("token_endpoint_auth_method") or "client_secret_basic"
    if isinstance(client_id, str):
        form["client_id"] = client_id
    if not isinstance(client_id, str) or not isinstance(secret, str) or method == "none":
        return form, {}
    if method == "client_secret_post":
        return {**form, "client_secret": secret}, {}
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
    return form, {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


async def revoke_at_service(data: dict[str, Any], client: dict[str, Any] | None) -> str:
    """Send the tokens of a token file's `data` to the service's revocation endpoint, refresh
    token first (RFC 7009 2.1); what happened, in words. `client`: the client registration
    (the file's, else the skill's pre-registered one)."""
    endpoint, tokens = data.get("revocation_endpoint"), data.get("tokens")
    if not isinstance(tokens, dict):
        return "not asked: no tokens were kept"
    if not isinstance(endpoint, str):
        return "not asked: the service names no revocation endpoint"
    if not endpoint.startswith("https://"):
        return "not asked: its revocation endpoint is not https"
    import httpx2
    from mcp.shared._httpx_utils import create_mcp_http_client

    sent = [
        (tokens[hint], hint)
        for hint in ("refresh_token", "access_token")
        if isinstance(tokens.get(hint), str)
    ]
    try:
        async with create_mcp_http_client(timeout=httpx2.Timeout(REVOKE_TIMEOUT)) as http:
            for token, hint in sent:
                form, headers = _client_auth(
                    client or {}, {"token": token, "token_type_hint": hint}
                )
                r = await http.post(endpoint, data=form, headers=headers)
                if r.status_code != 200:
                    return f"refused: HTTP {r.status_code}{_said(r)} (for the {hint})"
    except httpx2.HTTPError as exc:
        return f"not reached: {type(exc).__name__}"
    return "revoked"


def _said(response: Any) -> str:
    """The service's error code, when it is a plain token (its other words are not shown)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return f" {error}" if isinstance(error, str) and _ERROR.match(error) else ""
