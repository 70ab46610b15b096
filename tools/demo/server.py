"""The demo's MCP server: one harmless `send_email` tool that only pretends.

It exists so a newcomer sees an Action item with nothing configured. Nothing is sent
anywhere: the tool answers with what it *would* have sent.
Run: `python -m pizzabot.tools.demo` (stdio).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(
        "demo", instructions="A pretend mail outbox for the Pizza Bot demo. Nothing is sent."
    )

    @server.tool()
    def send_email(
        to: Annotated[str, Field(description="Recipient address")],
        subject: Annotated[str, Field(description="Subject line")],
        body: Annotated[str, Field(description="The message")],
        tone: Annotated[
            Literal["friendly", "formal", "brief"], Field(description="How it reads")
        ] = "friendly",
        copies: Annotated[int, Field(ge=1, le=5, description="How many copies to send")] = 1,
    ) -> str:
        """Send an email (demo: nothing is really sent)."""
        return (
            f"[demo] would have sent {copies} {tone} email(s) to {to} with subject {subject!r}: "
            f"{body[:200]}"
        )

    server.run()


if __name__ == "__main__":
    main()
