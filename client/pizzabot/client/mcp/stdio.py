"""`pizzabot mcp`: the MCP server over stdio, for MCP clients that start their servers as
processes (Claude Code, Claude Desktop, editors).

It talks to the running Pizza Bot server over HTTP (`pizzabot.client.mcp.remote`), so the
requests it files are the server's: they survive this process, and a client that starts it
again and asks again gets the same item (or, with the Tasks extension, asks `tasks/get` of
the task it was handed: the task is bound to the token, not to this process).
"""

from __future__ import annotations

import anyio

from pizzabot.client.mcp.tasks import Tasks
from pizzabot.client.mcp.tools import Asking, build_server

__all__ = ["serve", "serve_async"]


async def serve_async(url: str, token: str, *, skill: str, poll_ms: int = 5000) -> None:
    """Serve the tools on stdin/stdout until the client closes them; requests go to the
    inbox-only `skill` unless a call names another. A client that declares the Tasks
    extension gets tasks (`pizzabot.client.mcp.tasks`), polled every `poll_ms`."""
    from pizzabot.client import AsyncInbox
    from pizzabot.client.mcp.remote import RemoteDesk

    async with AsyncInbox(url, token) as inbox:
        desk = RemoteDesk(inbox, binding=token.encode())
        asking = Asking(desk_for=lambda _ctx: desk, skill=skill)
        tasks = Tasks(desk_for=lambda _ctx: desk, poll_ms=poll_ms)
        await build_server(asking, extensions=[tasks]).run_stdio_async()


def serve(url: str, token: str, *, skill: str) -> None:
    """Serve the tools on stdin/stdout, asking the server at `url` with `token`."""
    anyio.run(lambda: serve_async(url, token, skill=skill))
