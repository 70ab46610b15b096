"""Reaching a skill's MCP server over HTTP: the headers the skill gives it, and a refusal said
plainly.

Hosted MCP servers want a token. A skill names it in `mcp_servers.X.headers`, with secrets
taken from the server's environment the way `.mcp.json` files do it:
`Authorization: "Bearer ${CRM_TOKEN}"`. The values are resolved when the connection opens,
from the environment the composition root hands over, and are never logged nor shown: an
error names the header and the variable, not the value.

A server that refuses the client answers 401 or 403 before any MCP message; the SDK turns
that into a bare JSON-RPC error (-32603). `Refusals` watches the HTTP answers, so the run
can say what happened instead: "crm.example answered 401 Unauthorized: needs a token".
Nothing of the refusal's body or headers is repeated: every byte from a server is hostile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pizzabot.agent.errors import RunError

__all__ = ["HttpTarget", "Refusals", "resolve_headers"]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def resolve_headers(
    server: str, headers: Mapping[str, str], env: Mapping[str, str]
) -> dict[str, str]:
    """`headers` with every `${NAME}` replaced by that variable of `env`. A variable that is
    not set is a mistake in the set-up: refused, naming the header and the variable."""
    out: dict[str, str] = {}
    for name, template in headers.items():

        def value(match: re.Match[str], header: str = name) -> str:
            var = match.group(1)
            if var not in env:
                raise RunError(
                    f"MCP server {server!r}: header {header} needs the environment variable "
                    f"{var}, which is not set"
                )
            return env[var]

        resolved = _VAR.sub(value, template)
        if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in resolved):
            # A line break would end the header early (and could start another one).
            raise RunError(
                f"MCP server {server!r}: header {name}: a variable it names holds a line break "
                "or control character"
            )
        out[name] = resolved
    return out


@dataclass
class Refusals:
    """The last 401 or 403 an HTTP MCP server answered (an httpx response hook)."""

    url: str
    #: Whether the skill sends an `Authorization` header (what a 401 then means differs).
    authorized: bool
    status: int | None = None

    async def hook(self, response: Any) -> None:
        if response.status_code in (401, 403):
            self.status = response.status_code

    def said(self) -> str | None:
        """The refusal in words (None: the server refused nothing)."""
        host = urlsplit(self.url).hostname or self.url
        if self.status == 401:
            why = "the token was refused" if self.authorized else "needs a token"
            return f"{host} answered 401 Unauthorized: {why}"
        if self.status == 403:
            return f"{host} answered 403 Forbidden: the token may not do this"
        return None


@dataclass(frozen=True)
class HttpTarget:
    """An HTTP MCP server as a connection opens it: its URL and the headers to send (with
    their secrets resolved: never logged, never shown)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    #: Whether tokens come from OAuth (a 401 then means the token was refused).
    oauth: bool = False

    def refusals(self) -> Refusals:
        authorized = self.oauth or any(k.lower() == "authorization" for k in self.headers)
        return Refusals(self.url, authorized)
