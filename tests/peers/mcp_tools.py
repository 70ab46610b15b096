"""A small "crm" MCP server for tests: real tools with real schemas over stdio or HTTP.

Run it as a script so the engine meets it the way it meets any MCP server:

    python tests/peers/mcp_tools.py stdio        # serve over stdin/stdout
    python tests/peers/mcp_tools.py http PORT    # streamable HTTP at http://127.0.0.1:PORT/mcp

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
from pydantic import Field

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
async def serve_http(*, log: Path | None = None, startup: float = 20.0) -> AsyncIterator[str]:
    """Run the HTTP variant in a subprocess on a free port; yield `http://127.0.0.1:N/mcp`."""
    port = free_port()
    with tempfile.TemporaryFile() as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            "http",
            str(port),
            env=_child_env(log),
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
    loop = asyncio.get_running_loop()
    deadline = loop.time() + startup
    while True:
        if proc.returncode is not None:
            stderr.seek(0)
            output = stderr.read().decode(errors="replace")
            raise RuntimeError(f"MCP test server exited with {proc.returncode}:\n{output}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if loop.time() > deadline:
                raise TimeoutError(f"MCP test server not listening on {port}") from None
            await asyncio.sleep(0.05)
            continue
        writer.close()
        await writer.wait_closed()
        return


def main(argv: list[str]) -> None:
    match argv:
        case ["stdio"]:
            build_server().run()
        case ["http", port]:
            build_server().run("streamable-http", host="127.0.0.1", port=int(port))
        case _:
            sys.exit("usage: mcp_tools.py stdio | http PORT")


if __name__ == "__main__":
    main(sys.argv[1:])
