"""The desk of `/mcp`: the server's own requests (`pizzabot.agent.requests.Requests`), in-process.

A call to `/mcp` files its request exactly as `POST /api/requests` would (the same skill's
rules and grants, the same item on every channel) and waits on the same decision bell, so
a decision wakes it at once without reading the database in a loop.
"""

from __future__ import annotations

from pizzabot.agent.errors import PizzaBotError
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.requests import Requests
from pizzabot.channels.requests_wire import new_request, wire_state
from pizzabot.client.mcp.desk import DeskError
from pizzabot.client.wire import RequestBody, RequestState

__all__ = ["LocalDesk"]


class LocalDesk:
    """Requests filed with, waited for and withdrawn on this server's own `Requests`, as
    `by` (the principal whose token the MCP call carried); `binding` is that token, which
    the call's task ids are bound to (`pizzabot.client.mcp.tasks`)."""

    def __init__(self, requests: Requests, *, by: Principal, binding: bytes = b"") -> None:
        self._requests = requests
        self._by = by
        self.binding = binding

    async def submit(self, body: RequestBody, *, key: str) -> RequestState:
        try:
            state, created = await self._requests.create(
                new_request(body), by=self._by, idempotency_key=key
            )
        except PizzaBotError as exc:
            raise DeskError(str(exc)) from None
        return wire_state(state, created=created)

    async def withdraw(self, request_id: str) -> RequestState:
        try:
            return wire_state(await self._requests.withdraw(request_id, by=self._by))
        except PizzaBotError as exc:
            raise DeskError(str(exc)) from None

    async def wait(self, request_id: str, seconds: float) -> RequestState:
        try:
            return wire_state(await self._requests.wait(request_id, seconds, by=self._by))
        except PizzaBotError as exc:
            raise DeskError(str(exc)) from None
