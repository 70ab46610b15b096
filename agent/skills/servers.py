"""What a skill reaches: the MCP servers it starts or calls, and the folders it may use."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pizzabot.agent.skills._base import Strict

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StdioServer(Strict):
    """A server Pizza Bot starts as a child process. It runs with a minimal environment:
    `PATH`, `HOME` and `LANG` from the server's, the variables named in `pass_env`, and what
    `env` sets; all of the server's environment (its secrets included) only with
    `inherit_env: true`."""

    command: str
    args: list[str] = []
    env: dict[str, str] = {}
    pass_env: list[str] = []
    inherit_env: bool = False
    cwd: str | None = None

    @field_validator("env", "pass_env")
    @classmethod
    def _env_names(cls, v: Any) -> Any:
        for name in v:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return v


# An HTTP header name (RFC 9110 token), and a value without control characters.
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_VAR_ONLY = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
# RFC 6749 scope-token: printable ASCII without space, quote or backslash.
_SCOPE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]{1,200}$")


class HttpServer(Strict):
    """A server Pizza Bot reaches over streamable HTTP at `url`, sending `headers` with every
    request; `${NAME}` in a value is taken from the server's environment when it connects
    (`pizzabot.agent.mcp_http`), so a token need not be written in the file."""

    url: str
    headers: dict[str, str] = {}
    #: `oauth`: the server wants OAuth 2.1; a person connects it once from a card, and the
    #: tokens are kept per skill and server (`pizzabot.agent.mcp_oauth`).
    auth: Literal["oauth"] | None = None
    #: A client ID registered with the service beforehand (otherwise the client registers
    #: itself where the service allows it), as is or as `${VAR}`; its secret, if any, named
    #: as `${VAR}`.
    client_id: str | None = Field(default=None, max_length=400)
    client_secret: str | None = Field(default=None, max_length=400)
    #: The scopes asked for at the first consent (otherwise what the server's challenge names).
    scopes: list[str] = []

    @model_validator(mode="after")
    def _oauth_only(self) -> HttpServer:
        if self.auth is None and (self.client_id or self.client_secret or self.scopes):
            raise ValueError("client_id, client_secret and scopes need auth: oauth")
        if self.client_secret is not None and not _VAR_ONLY.match(self.client_secret):
            raise ValueError("client_secret must name an environment variable: ${NAME}")
        for scope in self.scopes:
            if not _SCOPE.match(scope):
                raise ValueError(f"{scope[:60]!r} is not an OAuth scope")
        return self

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name[:60]!r} is not an HTTP header name")
            if _CONTROL.search(value):
                raise ValueError(f"header {name}: the value has a line break or control character")
        return v


class Folder(Strict):
    path: str
    write: bool = False
