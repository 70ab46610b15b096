"""A hosted MCP server behind OAuth 2.1, with its own authorization server, built from the MCP
SDK's server-side auth (`mcp.server.auth`) and served over HTTPS on loopback:

    https://127.0.0.1:N/mcp                                the "crm" tools; 401 without a token
    https://127.0.0.1:N/.well-known/oauth-protected-resource/mcp     (RFC 9728)
    https://127.0.0.1:N/.well-known/oauth-authorization-server       (RFC 8414)
    https://127.0.0.1:N/register  /authorize  /token  /revoke

`/authorize` consents at once (the "person" is whoever follows the link) and sends the browser
back to the client's redirect URI with a code, or with `error=invalid_scope` when a scope
outside `grantable` is asked for (registration takes `crm.admin` too, so that a refusal comes
from the consent). Tokens live in memory; a test can make them short-lived
(`expires_in`), count the refreshes, see which scopes were granted, and which tokens were
sent to `/revoke` (RFC 7009; `revocation=False`: the metadata names no such endpoint).

Its tools are `lookup`, or with `tools="hubspot"` ones named and shaped like HubSpot's hosted
server's (`search_crm_objects`, `get_crm_objects`, `manage_crm_objects`, which creates and
updates; what it creates is kept in `created`). With `registration=False` it refuses dynamic
registration, as HubSpot does: a client must be registered beforehand (`preregister`).

    async with OAuthMcp(tmp_path) as peer:   # peer.url, peer.certs.ca_file
        ...
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import uvicorn
from mcp.server.auth.handlers import revoke as _revoke
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from tests.peers.certs import TestCertificates, make_certificates

__all__ = ["OAuthMcp", "Provider"]


class _RevocationRequest(_revoke.RevocationRequest):
    """RFC 7009 2.1: a public client revokes with its `client_id` alone; the SDK's model
    wants a `client_secret` key in every request, so the peer takes one without it."""

    client_secret: str | None = None


_revoke.RevocationRequest = _RevocationRequest  # type: ignore[misc]


@dataclass
class Provider:
    """An in-memory authorization server (the SDK's `OAuthAuthorizationServerProvider`)."""

    grantable: set[str]
    expires_in: int = 3600
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    refreshes: int = 0
    consents: int = 0
    #: The scopes of each consent given, in order.
    granted: list[list[str]] = field(default_factory=list)
    #: The tokens a client revoked at `/revoke`, in order (known ones only).
    revoked: list[str] = field(default_factory=list)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        scopes = params.scopes or []
        refused = [s for s in scopes if s not in self.grantable]
        if refused:
            raise AuthorizeError("invalid_scope", f"not granted here: {' '.join(refused)}")
        self.consents += 1
        self.granted.append(scopes)
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=scopes,
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        # The server is a little more lenient than the client is told to be (whole seconds).
        expires = int(time.time()) + self.expires_in + 2
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=self.expires_in,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(
            authorization_code.client_id, authorization_code.scopes, authorization_code.resource
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        self.refresh.pop(refresh_token.token, None)
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, None)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.revoked.append(token.token)
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def revoke_all(self) -> None:
        """The service forgets every token (a user revoked the app there)."""
        self.access.clear()
        self.refresh.clear()


def _server(
    base: str, provider: Provider, scopes: list[str], *, revocation: bool, registration: bool
) -> MCPServer:
    auth = AuthSettings(
        issuer_url=base,  # type: ignore[arg-type]
        resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
        validate_token_resource=False,
        required_scopes=scopes,
        client_registration_options=ClientRegistrationOptions(
            enabled=registration,
            valid_scopes=sorted(provider.grantable | set(scopes) | {"crm.admin"}),
        ),
        revocation_options=RevocationOptions(enabled=revocation),
    )
    return MCPServer("crm", auth=auth, auth_server_provider=provider)


def _lookup(server: MCPServer) -> None:
    @server.tool()
    def lookup(query: str) -> str:
        """Look a customer up."""
        return f"customer {query!r}: Ann Lee, ann@example.com"


ANN = {
    "id": "101",
    "properties": {"firstname": "Ann", "lastname": "Lee", "email": "ann@example.com"},
}


def _hubspot(server: MCPServer, created: list[dict[str, Any]]) -> None:
    @server.tool()
    def search_crm_objects(objectType: str, query: str = "") -> str:
        """Search CRM records of one type (contacts, companies, deals, notes, ...)."""
        found = [ANN] if objectType == "contacts" and query.lower() in "ann lee" else []
        return json.dumps({"total": len(found), "results": found})

    @server.tool()
    def get_crm_objects(objectType: str, objectIds: list[str]) -> str:
        """Read CRM records by ID."""
        return json.dumps({"results": [ANN] if "101" in objectIds else []})

    @server.tool()
    def manage_crm_objects(
        createRequest: dict[str, Any] | None = None, updateRequest: dict[str, Any] | None = None
    ) -> str:
        """Create or update CRM records or activities."""
        if createRequest is None:
            return json.dumps({"updated": 0})
        objects = createRequest.get("objects", [])
        created.extend(objects)
        ids = [str(9000 + len(created) - len(objects) + i) for i in range(len(objects))]
        return json.dumps({"created": [{"id": i} for i in ids]})


class OAuthMcp:
    """The peer, in the test's own event loop. `required`: the scopes `/mcp` demands;
    `grantable`: what `/authorize` grants (anything else is refused as `invalid_scope`)."""

    def __init__(
        self,
        root: Path,
        *,
        required: tuple[str, ...] = ("crm.read",),
        grantable: tuple[str, ...] = ("crm.read", "crm.write"),
        expires_in: int = 3600,
        revocation: bool = True,
        tools: Literal["lookup", "hubspot"] = "lookup",
        registration: bool = True,
    ) -> None:
        self.revocation = revocation
        self.certs: TestCertificates = make_certificates(root / "oauth-tls")
        self.tools = tools
        self.registration = registration
        #: What `manage_crm_objects` created, in order (each as the request gave it).
        self.created: list[dict[str, Any]] = []
        self.provider = Provider(set(grantable), expires_in=expires_in)
        self.required = list(required)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.base = f"https://127.0.0.1:{self._sock.getsockname()[1]}"
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def preregister(self, client_id: str, secret: str, redirect_uri: str) -> None:
        """A client registered by hand at the service, with its secret (sent as HTTP Basic)."""
        self.provider.clients[client_id] = OAuthClientInformationFull(
            client_id=client_id,
            client_secret=secret,
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="client_secret_basic",
            scope=" ".join(sorted(self.provider.grantable | set(self.required))),
        )

    async def __aenter__(self) -> OAuthMcp:
        server = _server(
            self.base,
            self.provider,
            self.required,
            revocation=self.revocation,
            registration=self.registration,
        )
        if self.tools == "hubspot":
            _hubspot(server, self.created)
        else:
            _lookup(server)
        app = server.streamable_http_app()
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            ssl_certfile=str(self.certs.cert_file),
            ssl_keyfile=str(self.certs.key_file),
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.02)
        return self

    async def __aexit__(
        self, *exc: type[BaseException] | BaseException | TracebackType | None
    ) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.wait({self._task}, timeout=10)
        self._sock.close()

    def challenge_seen(self) -> dict[str, Any]:
        return {"consents": self.provider.consents, "refreshes": self.provider.refreshes}
