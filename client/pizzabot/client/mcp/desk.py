"""What the MCP tools need from Pizza Bot, whichever way they reach it: hand in a request,
and wait for its decision.

The same tools serve two transports. `/mcp` runs inside the server and reaches the requests
in-process (`channels.mcp.local`); `pizzabot mcp` is a separate process speaking stdio to
its MCP client and HTTP to the running server (`pizzabot.client.mcp.remote`). Both translate
to and from the small types here, so the tools themselves know nothing of either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

__all__ = ["Answer", "Ask", "Desk", "DeskError"]


class DeskError(Exception):
    """A request the inbox refused (an unknown or model skill, a key reused with another
    body, a body it would not take): the tool reports it to the agent as a tool error."""


@dataclass(frozen=True)
class Ask:
    """One request, as `POST /api/requests` takes it: an approval (`tool` set) or a
    question (`question` set)."""

    skill: str
    title: str
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] | None = None
    #: `{"impact", "reversible", "scope"}`, each optional.
    risk: dict[str, Any] | None = None
    description: str | None = None
    timeout: float | None = None
    question: str | None = None


@dataclass(frozen=True)
class Answer:
    """Where a request stands, as `GET /api/requests/{id}` says it."""

    id: str
    item_id: str
    kind: Literal["approval", "question"]
    #: approval: pending|approved|edited|rejected|expired;
    #: question: pending|answered|declined|expired.
    status: str
    #: The final arguments (approval) or the answer (question); None while pending.
    args: dict[str, Any] | None
    reason: str | None
    decided_by: str | None
    via: str | None
    decided_at: datetime | None
    #: The item's web page.
    url: str
    #: This submission made the request (it was not found again by its key).
    created: bool = False

    @property
    def pending(self) -> bool:
        return self.status == "pending"


class Desk(Protocol):
    """Pizza Bot's requests, in-process or over HTTP."""

    async def submit(self, ask: Ask, *, key: str) -> Answer:
        """Create the request under idempotency key `key`, or find the one made with it
        before; returns at once. Raises `DeskError` when refused."""
        ...

    async def wait(self, request_id: str, seconds: float) -> Answer:
        """The request once decided, or as it stands after `seconds`."""
        ...
