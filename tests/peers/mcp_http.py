"""Serving a test MCP server over streamable HTTP the way some real servers are served: only in
the handshake era (before 2026-07-28), or only to a caller with the right bearer token.

- **Handshake era only.** The SDK routes an HTTP request by its `MCP-Protocol-Version`
  header; a request that claims a 2026 version is answered 400 here, as a server that predates
  that version answers it. A client then falls back to the `initialize` handshake, and the
  server asks for input with `elicitation/create` in the middle of a call.
- **A bearer token.** Without `Authorization: Bearer <token>` every request gets 401 with a
  `WWW-Authenticate: Bearer` challenge, before the body is read, as hosted servers answer.
- **What came.** With `MCP_HTTP_LOG` set, each request's method and whether it named a
  session is appended to that file as a JSON line (`read_requests`), so a test sees a session
  being closed (`DELETE`).

Used from a peer's `main` (`serve(server, port, legacy=..., token=...)`), in its own process.
"""

from __future__ import annotations

import hmac
import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

__all__ = ["REQUESTS_ENV", "TOKEN_ENV", "guarded", "read_requests", "serve"]

#: The environment variable a peer reads the token it demands from.
TOKEN_ENV = "MCP_BEARER_TOKEN"
#: The environment variable naming the file the requests are noted in.
REQUESTS_ENV = "MCP_HTTP_LOG"


def read_requests(path: Path) -> list[dict[str, Any]]:
    """The requests a peer noted, oldest first."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _note(path: str | None, method: str, session: bool) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"method": method, "session": session}) + "\n")


Scope = dict[str, Any]


async def _refuse(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    head = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": [*head, *headers]})
    await send({"type": "http.response.body", "body": body})


def guarded(
    app: Any, *, legacy: bool = False, token: str | None = None, log: str | None = None
) -> Any:
    """`app` behind the two checks this module describes, noting requests in `log`."""

    async def asgi(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        _note(log, scope["method"], "mcp-session-id" in headers)
        if token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                challenge = (b"www-authenticate", b'Bearer error="invalid_token"')
                await _refuse(send, 401, b'{"error": "invalid_token"}', [challenge])
                return
        version = headers.get("mcp-protocol-version")
        if legacy and version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            body = b'{"error": "unsupported protocol version"}'
            await _refuse(send, 400, body, [])
            return
        await app(scope, receive, send)

    return asgi


def serve(server: MCPServer, port: int, *, legacy: bool = False, token: str | None = None) -> None:
    """Serve `server` at `http://127.0.0.1:<port>/mcp` until the process ends."""
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(
        guarded(app, legacy=legacy, token=token, log=os.environ.get(REQUESTS_ENV)),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
    )
    uvicorn.Server(config).run()
