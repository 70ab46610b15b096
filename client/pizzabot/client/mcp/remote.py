"""The desk of `pizzabot mcp`: the running server's requests API, through the Python client.

The stdio MCP server is a process of its own, started by the MCP client, so it reaches
Pizza Bot like any other agent does: `POST /api/requests` to file a request, long polls
of `GET /api/requests/{id}?wait=` to learn its decision and `POST /api/requests/{id}/cancel`
to withdraw it (`pizzabot.client.AsyncInbox`). A server
that is briefly away (a restart) does not fail a tool call that is only waiting: the request
lives on the server, and the next poll finds it again.
"""

from __future__ import annotations

from pizzabot.client import AsyncInbox, InboxError
from pizzabot.client.mcp.desk import DeskAway, DeskError
from pizzabot.client.wire import RequestBody, RequestState

__all__ = ["RemoteDesk"]

#: The longest one long poll may hold (the API's limit).
MAX_WAIT = 60.0


class RemoteDesk:
    """Requests filed with, and waited for on, a running Pizza Bot server."""

    def __init__(self, inbox: AsyncInbox, *, binding: bytes = b"") -> None:
        self._inbox = inbox
        #: The API token: what the tasks of `pizzabot.client.mcp.tasks` are bound to.
        self.binding = binding
        #: The last answer seen per request: what a wait reports while the server is away.
        self._seen: dict[str, RequestState] = {}

    async def submit(self, body: RequestBody, *, key: str) -> RequestState:
        try:
            state = await self._inbox.file(body, idempotency_key=key)
        except InboxError as exc:
            raise DeskError(str(exc)) from None
        self._seen[state.id] = state
        return state

    async def withdraw(self, request_id: str) -> RequestState:
        try:
            return await self._inbox.cancel(request_id)
        except InboxError as exc:
            raise _refused(exc) from None

    async def wait(self, request_id: str, seconds: float) -> RequestState:
        try:
            decision = await self._inbox.get(request_id, wait=min(max(seconds, 0.0), MAX_WAIT))
        except InboxError as exc:
            last = self._seen.get(request_id)
            if last is None or (exc.status is not None and exc.status < 500):
                raise _refused(exc) from None
            return last  # the server is away for now; the request waits there
        self._seen[request_id] = decision
        return decision


def _refused(exc: InboxError) -> DeskError:
    """A refusal (a 4xx: no such request, not this token's), or the server away (no answer,
    or a 5xx), which a later try may get past."""
    if exc.status is None or exc.status >= 500:
        return DeskAway(str(exc))
    return DeskError(str(exc))
