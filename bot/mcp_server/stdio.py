"""`pizzabot mcp`: the MCP server over stdio, for MCP clients that start their servers as
processes (Claude Code, Claude Desktop, editors).

It talks to the running Pizza Bot server over HTTP (`bot.mcp_server.remote`), so the
requests it files are the server's: they survive this process, and a client that starts it
again and asks again gets the same item.
"""

from __future__ import annotations

import anyio

from bot.mcp_server.tools import Asking, build_server

__all__ = ["serve", "serve_async"]


def default_skill() -> str:
    """The inbox-only skill requests go to unless a call names one (`PIZZABOT_MCP_SKILL`)."""
    from bot.settings import Settings

    return Settings().mcp_skill


async def serve_async(url: str, token: str, *, skill: str | None = None) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    from bot.client import AsyncInbox
    from bot.mcp_server.remote import RemoteDesk

    async with AsyncInbox(url, token) as inbox:
        desk = RemoteDesk(inbox)
        asking = Asking(desk_for=lambda _ctx: desk, skill=skill or default_skill())
        await build_server(asking).run_stdio_async()


def serve(url: str, token: str, *, skill: str | None = None) -> None:
    """Serve the tools on stdin/stdout, asking the server at `url` with `token`."""
    anyio.run(lambda: serve_async(url, token, skill=skill))
