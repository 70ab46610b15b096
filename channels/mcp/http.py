"""`/mcp` on the server: the MCP tools over streamable HTTP, asking the server's own
requests in-process.

The endpoint is stateless (each POST carries its own call), so any server process sharing
the database can answer any call, and a call waiting on a person holds only its own
response stream, on which its progress notifications travel. A bearer token guards it like
`/api` (`pizzabot.channels.http.guard.TokenGate`, before the body is read), and each call's requests are
filed as that token's principal: an `ask` token is enough, and is what an agent should hold.
The MCP SDK's Host and Origin checks guard a server that listens on loopback against DNS
rebinding.

The SDK's session manager needs a task group that lives as long as the app: it is started
with the first call, as a background task of the running services, and ends with them. The
MCP SDK itself loads then too, not when the server starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.routing import Route
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from fastapi import FastAPI
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from pizzabot.agent.requests import Requests

__all__ = ["MCP_PATH", "McpConfig", "McpDeps", "McpEndpoint", "install", "transport_security"]

MCP_PATH = "/mcp"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class McpConfig:
    """How the endpoint is served: the inbox-only skill requests go to unless a call names
    one, where the server listens, its public URL, the largest body it takes."""

    skill: str
    host: str
    public_url: str = ""
    max_body_bytes: int = 1024 * 1024
    #: How often a Tasks client is asked to poll a task (`pollIntervalMs`).
    task_poll_ms: int = 5000


@dataclass(frozen=True)
class McpDeps:
    """What the endpoint needs from the running server (set on the app's state)."""

    requests: Requests
    #: Run a task as long as the server does (the SDK's session manager).
    spawn: Callable[[Coroutine[Any, Any, Any], str], Any]


def transport_security(config: McpConfig) -> TransportSecuritySettings:
    """Host and Origin checks for a server on loopback: loopback names, and the public URL's
    host (a reverse proxy passes it on). A server listening on other addresses is reached by
    names it cannot know; there the bearer token alone guards `/mcp` (a page that rebinds a
    name still cannot present the token)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if config.host not in LOOPBACK:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = ["127.0.0.1", "localhost", "[::1]", "127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if config.public_url:
        public = urlsplit(config.public_url)
        if public.netloc:
            hosts.append(public.netloc)
            origins.append(f"{public.scheme}://{public.netloc}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class McpEndpoint:
    """The ASGI app at `/mcp`. It finds what it needs on the app's state (`McpDeps`), so it
    can be installed before the server has started."""

    def __init__(self, *, config: McpConfig) -> None:
        self._config = config
        self._manager: StreamableHTTPSessionManager | None = None
        self._ready = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is None:
            self._start(scope["app"].state.mcp)
        await self._ready.wait()
        assert self._manager is not None
        await self._manager.handle_request(scope, receive, send)

    def _start(self, deps: McpDeps) -> None:
        """Build the MCP server over the services' requests and run its session manager.
        No await before `_manager` is set: concurrent first calls start it once."""
        from mcp.server.context import ServerRequestContext

        from pizzabot.agent.policy.principal import Principal
        from pizzabot.channels.http.guard import PRINCIPAL
        from pizzabot.channels.mcp.local import LocalDesk
        from pizzabot.client.mcp.desk import DeskError
        from pizzabot.client.mcp.tasks import Tasks
        from pizzabot.client.mcp.tools import Asking, build_server

        config = self._config
        requests = deps.requests

        def desk_for(ctx: ServerRequestContext[Any, Any]) -> LocalDesk:
            # The token gate left the call's principal on the HTTP request's scope, and
            # checked the token it takes task ids to be bound to.
            request = ctx.request
            who = request.scope.get(PRINCIPAL) if request is not None else None
            if not isinstance(who, Principal):
                raise DeskError("this call carries no token the server knows")
            header = request.headers.get("authorization", "") if request is not None else ""
            token = header.partition(" ")[2].strip()
            return LocalDesk(requests, by=who, binding=token.encode())

        asking = Asking(desk_for=desk_for, skill=config.skill)
        tasks = Tasks(desk_for=desk_for, poll_ms=config.task_poll_ms)
        # serverInfo names the server's release, not the client distribution's.
        server = build_server(asking, version=_version(), extensions=[tasks])
        server.streamable_http_app(
            stateless_http=True,
            transport_security=transport_security(config),
            max_request_body_size=config.max_body_bytes,
        )
        manager = self._manager = server.session_manager
        ready = self._ready

        async def run() -> Any:
            try:
                async with manager.run():
                    ready.set()
                    await asyncio.Event().wait()  # until the services shut down
            finally:
                ready.set()  # a manager that failed to start answers 500, not never

        deps.spawn(run(), "mcp-http")


def install(app: FastAPI, config: McpConfig) -> None:
    """Serve the MCP tools at `/mcp` (the token guard is installed with the others)."""
    app.router.routes.append(Route(MCP_PATH, McpEndpoint(config=config), include_in_schema=False))


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("pizzabot")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "0+unknown"
