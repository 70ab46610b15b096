"""What the MCP tools need from Pizza Bot, whichever way they reach it: hand in a request,
and wait for its decision.

The same tools serve two transports. `/mcp` runs inside the server and reaches the requests
in-process (`channels.mcp.local`); `pizzabot mcp` is a separate process speaking stdio to
its MCP client and HTTP to the running server (`pizzabot.client.mcp.remote`). Both translate
to and from the wire's own shapes (`pizzabot.client.wire`), so the tools themselves know
nothing of either.
"""

from __future__ import annotations

from typing import Protocol

from pizzabot.client.wire import RequestBody, RequestState

__all__ = ["Desk", "DeskAway", "DeskError"]


class DeskError(Exception):
    """A request the inbox refused (an unknown or model skill, a key reused with another
    body, a body it would not take): the tool reports it to the agent as a tool error."""


class DeskAway(DeskError):
    """The inbox could not be reached just now (the server is restarting, the network is
    down): not a refusal, and asking again later may work."""


class Desk(Protocol):
    """Pizza Bot's requests, in-process or over HTTP."""

    async def submit(self, body: RequestBody, *, key: str) -> RequestState:
        """Create the request under idempotency key `key`, or find the one made with it
        before; returns at once. Raises `DeskError` when refused."""
        ...

    async def wait(self, request_id: str, seconds: float) -> RequestState:
        """The request once decided, or as it stands after `seconds`."""
        ...
