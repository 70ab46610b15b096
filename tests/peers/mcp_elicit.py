"""An "ask" MCP server for tests: tools that ask the person behind the run for input in the
middle of a call (MCP elicitation), over stdio or HTTP, with the official SDK.

    python tests/peers/mcp_elicit.py stdio        # serve over stdin/stdout
    python tests/peers/mcp_elicit.py http PORT    # streamable HTTP at http://127.0.0.1:PORT/mcp
    python tests/peers/mcp_elicit.py stdio legacy # only the handshake era (before 2026-07-28)

The 2026-07-28 protocol asks with an "input required" result and a retry of the call; earlier
versions send `elicitation/create` in the middle of the call and wait for its answer. A
`legacy` server answers no `server/discover`, so a client falls back to the `initialize`
handshake and the server asks the old way (as servers on the 1.x SDK do).

From a test, `server_entry(log)` is the stdio server as a skill's `mcp_servers` entry, and
`serve_http(log=...)` starts the HTTP variant on a free port and yields its URL.

- `profile` asks for a form with every kind of field a form question may have (`FORM`):
  text, email, link, date, date-time, whole number, number, yes/no, a choice, a titled choice
  and several choices (plain and titled);
- `connect` asks the person to open a link (URL mode);
- `link` asks the person to open the link it is called with (URL mode: any text the asker
  sends, so a test can offer one that reads differently than it opens);
- `nested` asks for a form no channel can draw (a nested object): the client must refuse it;
- `hello` asks nothing: it says how the client introduced itself (`clientInfo`);
- `defaults` asks for a form whose every field has a `default` (`DEFAULTS`, the shape of the
  conformance suite's defaults scenario): what is not changed must come back as the default.

Each tool writes what it got back (`action`, `content`, with the Python type of every
value) to the JSON-lines file named by `MCP_TOOLS_LOG` (`tests.peers.mcp_tools.read_log`
reads it) and returns it as JSON text, so a test checks exactly what reached the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)
from mcp_types.version import is_version_at_least

SCRIPT = Path(__file__).resolve()
LOG_ENV = "MCP_TOOLS_LOG"
LINK = "https://auth.example.test/connect?account=42"

#: The form `profile` asks for: one field of every kind.
FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 1},
        "email": {"type": "string", "format": "email", "title": "Email"},
        "homepage": {"type": "string", "format": "uri", "title": "Homepage"},
        "birthday": {"type": "string", "format": "date", "title": "Birthday"},
        "meeting": {"type": "string", "format": "date-time", "title": "Meeting"},
        "seats": {"type": "integer", "title": "Seats", "minimum": 1, "maximum": 9},
        "budget": {"type": "number", "title": "Budget"},
        "vip": {"type": "boolean", "title": "VIP", "default": False},
        "size": {"type": "string", "enum": ["small", "medium", "large"], "title": "Size"},
        "color": {
            "type": "string",
            "title": "Color",
            "oneOf": [
                {"const": "r", "title": "Red"},
                {"const": "g", "title": "Green"},
                {"const": "b", "title": "Blue"},
            ],
        },
        "tags": {
            "type": "array",
            "title": "Tags",
            "items": {"type": "string", "enum": ["new", "vip", "late"]},
        },
        "pets": {
            "type": "array",
            "title": "Pets",
            "items": {
                "anyOf": [{"const": "cat", "title": "Cat"}, {"const": "dog", "title": "Dog"}]
            },
        },
    },
    "required": ["name", "email", "seats", "size", "color"],
}

#: A form whose fields all have defaults (text, whole number, number, choice, yes/no).
DEFAULTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "default": "John Doe"},
        "age": {"type": "integer", "title": "Age", "default": 30},
        "score": {"type": "number", "title": "Score", "default": 95.5},
        "status": {
            "type": "string",
            "title": "Status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "title": "Verified", "default": True},
    },
}

NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def _typed(content: dict[str, Any] | None) -> dict[str, str] | None:
    if content is None:
        return None
    return {k: type(v).__name__ for k, v in content.items()}


def _record(tool: str, action: str, content: dict[str, Any] | None) -> str:
    line = {"tool": tool, "action": action, "content": content, "types": _typed(content)}
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
    return json.dumps(line)


async def _ask(
    ctx: Context, key: str, request: ElicitRequest
) -> ElicitResult | InputRequiredResult:
    """Ask as the negotiated protocol does: from 2026-07-28 the call answers "input
    required" and the client calls again with the answer; before, a request to the client
    in the middle of the call."""
    version = ctx.protocol_version
    if version is not None and is_version_at_least(version, "2026-07-28"):
        answered = (ctx.input_responses or {}).get(key)
        if isinstance(answered, ElicitResult):
            return answered
        return InputRequiredResult(input_requests={key: request}, request_state=key)
    params = request.params
    if isinstance(params, ElicitRequestURLParams):
        return await ctx.session.elicit_url(
            params.message, params.url, params.elicitation_id, ctx.request_id
        )
    return await ctx.session.elicit_form(params.message, params.requested_schema, ctx.request_id)


def _form(message: str, schema: dict[str, Any]) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


async def profile(ctx: Context) -> str | InputRequiredResult:
    """Ask the person for the customer's profile, then say what came back."""
    got = await _ask(ctx, "profile", _form("Fill in the customer's profile, please.", FORM))
    if isinstance(got, InputRequiredResult):
        return got
    return _record("profile", got.action, got.content)


async def connect(ctx: Context) -> str | InputRequiredResult:
    """Ask the person to connect their account on the provider's page."""
    link = ElicitRequestURLParams(
        message="Connect your account so I can read the invoices.",
        url=LINK,
        elicitation_id="connect-42",
    )
    got = await _ask(ctx, "connect", ElicitRequest(params=link))
    if isinstance(got, InputRequiredResult):
        return got
    return _record("connect", got.action, None)


async def link(url: str, ctx: Context) -> str | InputRequiredResult:
    """Ask the person to open `url`."""
    params = ElicitRequestURLParams(
        message="Please sign in here.", url=url, elicitation_id="link-1"
    )
    got = await _ask(ctx, "link", ElicitRequest(params=params))
    if isinstance(got, InputRequiredResult):
        return got
    return _record("link", got.action, None)


async def nested(ctx: Context) -> str | InputRequiredResult:
    """Ask for a form with a nested object (which a client refuses)."""
    got = await _ask(ctx, "nested", _form("Where do you live?", NESTED))
    if isinstance(got, InputRequiredResult):
        return got
    return _record("nested", got.action, got.content)


async def defaults(ctx: Context) -> str | InputRequiredResult:
    """Ask for a form whose every field has a default."""
    got = await _ask(ctx, "defaults", _form("Check these, please.", DEFAULTS))
    if isinstance(got, InputRequiredResult):
        return got
    return _record("defaults", got.action, got.content)


async def hello(ctx: Context) -> str:
    """Say how the client introduced itself, and in which protocol version."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return json.dumps(
        {
            "name": info.name if info is not None else None,
            "version": info.version if info is not None else None,
            "protocol": ctx.protocol_version,
        }
    )


def build_server() -> MCPServer:
    server = MCPServer("ask", log_level="WARNING")
    for tool in (profile, connect, link, nested, defaults, hello):
        server.add_tool(tool)
    return server


def _handshake_era_only() -> None:
    """Serve every stdio connection in the handshake era, whatever its first request: the
    SDK opens a 2026 connection when the first request carries that protocol's envelope."""
    from mcp.server import runner

    runner._has_modern_envelope = lambda params: False  # type: ignore[assignment]


def server_entry(log: Path, *, legacy: bool = False) -> dict[str, Any]:
    """This server as a skill's `mcp_servers` entry (stdio)."""
    args = [str(SCRIPT), "stdio", *(["legacy"] if legacy else [])]
    return {"command": "python", "args": args, "env": {LOG_ENV: str(log)}}


@contextlib.asynccontextmanager
async def serve_http(
    *, log: Path, startup: float = 20.0, legacy: bool = False, requests: Path | None = None
) -> AsyncIterator[str]:
    """Run the HTTP variant in a subprocess on a free port; yield `http://127.0.0.1:N/mcp`."""
    # Imported here: this file also runs on its own as the MCP server, where `tests` is not
    # on the import path.
    from tests.peers.mcp_http import REQUESTS_ENV
    from tests.peers.mcp_tools import _wait_listening, free_port

    port = free_port()
    env = {**os.environ, LOG_ENV: str(log)}
    if requests is not None:
        env[REQUESTS_ENV] = str(requests)  # the HTTP requests it got, noted there
    with tempfile.TemporaryFile() as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            "http",
            str(port),
            *(["legacy"] if legacy else []),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            await _wait_listening(proc, port, stderr, startup)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


def main(argv: list[str]) -> None:
    match argv:
        case ["stdio", *era] if era in ([], ["legacy"]):
            if era:
                _handshake_era_only()
            build_server().run()
        case ["http", port, *era] if era in ([], ["legacy"]):
            sys.path.insert(0, str(SCRIPT.parents[2]))  # run as a script: find `tests`
            from tests.peers.mcp_http import serve

            serve(build_server(), int(port), legacy=bool(era))
        case _:
            sys.exit("usage: mcp_elicit.py stdio [legacy] | http PORT [legacy]")


if __name__ == "__main__":
    main(sys.argv[1:])
