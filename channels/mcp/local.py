"""The desk of `/mcp`: the server's own requests (`pizzabot.agent.requests.Requests`), in-process.

A call to `/mcp` files its request exactly as `POST /api/requests` would (the same skill's
rules and grants, the same item on every channel) and waits on the same decision bell, so
a decision wakes it at once without reading the database in a loop.
"""

from __future__ import annotations

from pizzabot.agent.errors import PizzaBotError
from pizzabot.agent.model import Risk
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.requests import NewRequest, Requests, RequestState
from pizzabot.client.mcp.desk import Answer, Ask, DeskError

__all__ = ["LocalDesk"]


def _answer(s: RequestState, *, created: bool = False) -> Answer:
    return Answer(
        id=s.id,
        item_id=s.item_id,
        kind=s.kind,
        status=s.status,
        args=s.args,
        reason=s.reason,
        decided_by=s.decided_by,
        via=s.via,
        decided_at=s.decided_at,
        url=s.url,
        created=created,
    )


def _risk(notes: dict[str, object] | None) -> Risk | None:
    if not notes:
        return None
    impact, scope, reversible = notes.get("impact"), notes.get("scope"), notes.get("reversible")
    return Risk(
        impact=impact if isinstance(impact, str) else None,
        reversible=reversible if isinstance(reversible, bool) else None,
        scope=scope if isinstance(scope, str) else None,
    )


class LocalDesk:
    """Requests filed with and waited for on this server's own `Requests`, as `by` (the
    principal whose token the MCP call carried)."""

    def __init__(self, requests: Requests, *, by: Principal) -> None:
        self._requests = requests
        self._by = by

    async def submit(self, ask: Ask, *, key: str) -> Answer:
        new = NewRequest(
            skill=ask.skill,
            title=ask.title,
            tool=ask.tool,
            args=dict(ask.args),
            schema=ask.schema,
            risk=_risk(ask.risk),
            description=ask.description,
            timeout=ask.timeout,
            question=ask.question,
        )
        try:
            state, created = await self._requests.create(new, by=self._by, idempotency_key=key)
        except PizzaBotError as exc:
            raise DeskError(str(exc)) from None
        return _answer(state, created=created)

    async def wait(self, request_id: str, seconds: float) -> Answer:
        try:
            return _answer(await self._requests.wait(request_id, seconds, by=self._by))
        except PizzaBotError as exc:
            raise DeskError(str(exc)) from None
