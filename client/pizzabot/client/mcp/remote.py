"""The desk of `pizzabot mcp`: the running server's requests API, through the Python client.

The stdio MCP server is a process of its own, started by the MCP client, so it reaches
Pizza Bot like any other agent does: `POST /api/requests` to file a request and long polls
of `GET /api/requests/{id}?wait=` to learn its decision (`pizzabot.client.AsyncInbox`). A server
that is briefly away (a restart) does not fail a tool call that is only waiting: the request
lives on the server, and the next poll finds it again.
"""

from __future__ import annotations

from pizzabot.client import AsyncInbox, Decision, InboxError
from pizzabot.client.mcp.desk import Answer, Ask, DeskError

__all__ = ["RemoteDesk"]

#: The longest one long poll may hold (the API's limit).
MAX_WAIT = 60.0


def _answer(d: Decision) -> Answer:
    """The desk's answer; `created` as the client saw it (this call made the request)."""
    return Answer(
        id=d.id,
        item_id=d.item_id,
        kind=d.kind,
        status=d.status,
        args=d.args,
        reason=d.reason,
        decided_by=d.decided_by,
        via=d.via,
        decided_at=d.decided_at,
        url=d.url,
        created=d.created,
    )


class RemoteDesk:
    """Requests filed with, and waited for on, a running Pizza Bot server."""

    def __init__(self, inbox: AsyncInbox) -> None:
        self._inbox = inbox
        #: The last answer seen per request: what a wait reports while the server is away.
        self._seen: dict[str, Answer] = {}

    async def submit(self, ask: Ask, *, key: str) -> Answer:
        try:
            if ask.tool is not None:
                decision = await self._inbox.request(
                    ask.skill,
                    title=ask.title,
                    tool=ask.tool,
                    args=ask.args,
                    schema=ask.schema,
                    risk=ask.risk,
                    description=ask.description,
                    timeout=ask.timeout,
                    idempotency_key=key,
                )
            else:
                decision = await self._inbox.question(
                    ask.skill,
                    question=ask.question or ask.title,
                    title=ask.title,
                    schema=ask.schema,
                    timeout=ask.timeout,
                    idempotency_key=key,
                )
        except InboxError as exc:
            raise DeskError(str(exc)) from None
        answer = self._seen[decision.id] = _answer(decision)
        return answer

    async def wait(self, request_id: str, seconds: float) -> Answer:
        try:
            decision = await self._inbox.get(request_id, wait=min(max(seconds, 0.0), MAX_WAIT))
        except InboxError as exc:
            last = self._seen.get(request_id)
            if last is None or (exc.status is not None and exc.status < 500):
                raise DeskError(str(exc)) from None
            return last  # the server is away for now; the request waits there
        answer = self._seen[request_id] = _answer(decision)
        return answer
