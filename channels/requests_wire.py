"""Requests between the wire and the engine: the one translation of `pizzabot.client.wire`
(what an agent sends and reads) to the engine's nouns (`NewRequest`, `RequestState`) and
back, for every face that takes requests: the HTTP API, the MCP endpoint and callbacks.
"""

from __future__ import annotations

from pizzabot.agent.model import Risk
from pizzabot.agent.request_state import NewRequest
from pizzabot.agent.request_state import RequestState as State
from pizzabot.client.wire import RequestBody, RequestState

__all__ = ["new_request", "wire_state"]


def new_request(body: RequestBody) -> NewRequest:
    """What the engine is asked, from a request as sent."""
    risk = Risk(**body.risk.model_dump()) if body.risk is not None else None
    return NewRequest(
        skill=body.skill,
        title=body.title,
        tool=body.tool,
        args=dict(body.args),
        schema=body.schema_,
        risk=risk,
        description=body.description,
        timeout=body.timeout,
        callback_url=body.callback_url,
        question=body.question,
        preview=body.preview,
    )


def wire_state(state: State, *, created: bool = False) -> RequestState:
    """Where a request stands, as it is sent."""
    return RequestState(
        id=state.id,
        item_id=state.item_id,
        kind=state.kind,
        status=state.status,
        args=state.args,
        reason=state.reason,
        decided_by=state.decided_by,
        via=state.via,
        decided_at=state.decided_at,
        url=state.url,
        requested_by=state.requested_by,
        created_at=state.created_at,
        created=created,
    )
