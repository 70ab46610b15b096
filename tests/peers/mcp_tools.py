"""A small "crm" MCP server for tests: real tools with real schemas over stdio or HTTP.

Run it as a script so the engine meets it the way it meets any MCP server:

    python tests/peers/mcp_tools.py stdio        # serve over stdin/stdout
    python tests/peers/mcp_tools.py http PORT    # streamable HTTP at http://127.0.0.1:PORT/mcp
    python tests/peers/mcp_tools.py stdio shop   # the "shop" server (see `build_shop_server`)

Tools append what they did to the JSON-lines file named by `MCP_TOOLS_LOG`, so a test can
tell whether (and how often, and with which arguments) a side effect really happened, even
after the server process is gone. `read_log` reads it back.

From a test, `stdio_params(log=...)` gives the stdio launch parameters,
`serve_http(log=...)` starts the HTTP variant on a free port and yields its URL, and
`build_server()` gives the server object for an in-process `Client(build_server())`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import tempfile
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

SCRIPT = Path(__file__).resolve()
LOG_ENV = "MCP_TOOLS_LOG"


def _log(tool: str, event: str, args: dict[str, Any]) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = {"tool": tool, "event": event, "args": args, "pid": os.getpid()}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def send_email(
    to: Annotated[str, Field(description="Recipient's email address.")],
    subject: Annotated[str, Field(description="Subject line.")],
    body: Annotated[str, Field(description="Plain-text body.")],
    priority: Annotated[
        Literal["low", "normal", "high"], Field(description="How urgent the mail is.")
    ] = "normal",
    copies: Annotated[int, Field(ge=1, le=10, description="How many copies to send.")] = 1,
    cc: Annotated[str | None, Field(description="Optional carbon-copy address.")] = None,
    receipt: Annotated[bool, Field(description="Ask for a read receipt.")] = False,
) -> str:
    """Send an email to a customer. It cannot be unsent."""
    args = {
        "to": to,
        "subject": subject,
        "body": body,
        "priority": priority,
        "copies": copies,
        "cc": cc,
        "receipt": receipt,
    }
    _log("send_email", "called", args)
    return f"sent to {to}"


def lookup(query: Annotated[str, Field(description="Name or email to search for.")]) -> str:
    """Look up a customer record (read-only)."""
    _log("lookup", "called", {"query": query})
    return f"customer {query!r}: id C{zlib.crc32(query.encode()) % 10000:04d}, status active"


async def slow(seconds: Annotated[float, Field(description="How long to work.")]) -> str:
    """Work for a while; for tests that kill or crash a run mid-call."""
    _log("slow", "started", {"seconds": seconds})
    await asyncio.sleep(seconds)
    _log("slow", "finished", {"seconds": seconds})
    return f"slept {seconds:g}s"


def fail() -> str:
    """Always fails, as a broken tool would."""
    _log("fail", "called", {})
    # ToolError keeps the message for the caller; any other exception is reported as a bare
    # "Error executing tool fail".
    raise ToolError("the CRM is down")


def build_server() -> MCPServer:
    """The "crm" server. Built on demand: constructing an MCPServer configures root logging,
    which must not happen merely because a test imported this module."""
    server = MCPServer(
        "crm", instructions="A pretend CRM: mail customers and look them up.", log_level="WARNING"
    )
    for tool in (send_email, lookup, slow, fail):
        server.add_tool(tool)
    return server


class Customer(BaseModel):
    name: str
    country: Annotated[str, Field(description="ISO country code, like NL.")]


def refund(
    amount: Annotated[float, Field(description="How much to refund.")],
    currency: Annotated[str, Field(description="ISO currency code, like EUR.")],
    customer: Customer | None = None,
    reference: Annotated[str, Field(description="The invoice it refunds.")] = "",
    note: str | None = None,
) -> str:
    """Refund a customer. The amount is read leniently (as many real servers do): "100.0"
    is taken as a number, which is why policy rules must not be."""
    args = {"amount": amount, "currency": currency, "reference": reference, "note": note}
    if customer is not None:
        args["customer"] = customer.model_dump()
    _log("refund", "called", args)
    return f"refunded {amount:g} {currency}"


def read_notes(customer: Annotated[str, Field(description="Whose notes.")]) -> str:
    """Read the notes kept on a customer."""
    _log("read_notes", "called", {"customer": customer})
    return f"notes on {customer}: prefers email"


def close_account(customer: Annotated[str, Field(description="Whose account.")]) -> str:
    """Close a customer's account and delete their data."""
    _log("close_account", "called", {"customer": customer})
    return f"closed {customer}"


def build_shop_server() -> MCPServer:
    """The "shop" server: a refund tool for rules on argument values (nested arguments come
    as a `$ref` in its schema), and tools that describe themselves with MCP annotations."""
    server = MCPServer("shop", log_level="WARNING")
    server.add_tool(refund)
    server.add_tool(
        read_notes,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    server.add_tool(
        close_account,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, open_world_hint=True
        ),
    )
    return server


def shop_server(log: Path) -> dict[str, Any]:
    """The "shop" server as a skill's `mcp_servers` entry."""
    return {"command": "python", "args": [str(SCRIPT), "stdio", "shop"], "env": {LOG_ENV: str(log)}}


def read_log(path: Path) -> list[dict[str, Any]]:
    """The lines the tools wrote to `path`, oldest first; empty when nothing was written."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _child_env(log: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if log is not None:
        env[LOG_ENV] = str(log)
    return env


def stdio_params(*, log: Path | None = None) -> StdioServerParameters:
    """How to launch this server over stdio (for `mcp.client.Client(...)`)."""
    env = {LOG_ENV: str(log)} if log is not None else None
    return StdioServerParameters(command=sys.executable, args=[str(SCRIPT), "stdio"], env=env)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def serve_http(
    *, log: Path | None = None, startup: float = 20.0, token: str | None = None
) -> AsyncIterator[str]:
    """Run the HTTP variant in a subprocess on a free port; yield `http://127.0.0.1:N/mcp`.
    With `token`, every request must carry `Authorization: Bearer <token>` (else 401)."""
    from tests.peers.mcp_http import TOKEN_ENV

    port = free_port()
    env = _child_env(log) | ({TOKEN_ENV: token} if token is not None else {})
    with tempfile.TemporaryFile() as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            "http",
            str(port),
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


async def _wait_listening(
    proc: asyncio.subprocess.Process, port: int, stderr: Any, startup: float
) -> None:
    # Imported here: this file also runs on its own as the MCP server, where `tests` is not
    # on the import path.
    from tests.waiting import eventually

    def output() -> str:
        stderr.seek(0)
        text: str = stderr.read().decode(errors="replace")
        return text

    async def listening() -> bool:
        if proc.returncode is not None:
            raise RuntimeError(f"MCP test server exited with {proc.returncode}:\n{output()}")
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        await writer.wait_closed()
        return True

    await eventually(
        listening,
        what=f"the MCP test server to listen on port {port}",
        timeout=startup,
        retry_on=(OSError,),
        context=output,
    )


def main(argv: list[str]) -> None:
    match argv:
        case ["stdio"]:
            build_server().run()
        case ["stdio", "shop"]:
            build_shop_server().run()
        case ["http", port]:
            sys.path.insert(0, str(SCRIPT.parents[2]))  # run as a script: find `tests`
            from tests.peers.mcp_http import TOKEN_ENV, serve

            serve(build_server(), int(port), token=os.environ.get(TOKEN_ENV))
        case _:
            sys.exit("usage: mcp_tools.py stdio [shop] | http PORT")


if __name__ == "__main__":
    main(sys.argv[1:])
