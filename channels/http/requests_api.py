"""Requests from agents Pizza Bot does not run, under /api/requests (bearer token).

    POST /api/requests           an approval {"skill", "title", "tool", "args", "schema"?,
                                 "risk"?, "description"?, "timeout"?, "callback_url"?}, or a
                                 question {"skill", "title", "question", "schema"?, ...}
                                 → 201 the request's state (200: the Idempotency-Key was seen
                                 with this body; 409: with another body)
    GET  /api/requests/{id}      the request's state; ?wait=SECONDS (up to 60) answers once
                                 it is decided, or when the wait ends (still pending)
    POST /api/requests/{id}/cancel  withdraw it while it is pending (the requester no longer
                                 wants the answer): its cards say so; a decision stands

Both shapes are `pizzabot.client.wire`'s (`RequestBody`, `RequestState`): the client's own;
`status` is `halted` while the kill switch is on. An
`ask` token files requests and reads its own; nothing else. The item is decided like any other (`POST /api/items/{id}/decision`,
or on any channel). A `callback_url` receives the same body, signed, when it is decided
(`pizzabot.channels.callback`); its secret is the environment variable the skill's
`callback_secret_env` names, on the server.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Response

from pizzabot.agent.errors import InvalidArguments
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ASKING, caller
from pizzabot.channels.requests_wire import new_request, wire_state
from pizzabot.client.wire import RequestBody, RequestState

#: The longest `?wait=` (seconds): a proxy between may cut a longer request.
MAX_WAIT = 60.0


IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", max_length=200, pattern=r"^[\x21-\x7e]+$"),
]


def _check_callback(deps: ApiDeps, body: RequestBody) -> None:
    """A callback needs the skill's secret on this server: refused here, not at decision."""
    if body.callback_url is None or body.skill not in deps.skills:
        return
    if not deps.callback_secret(body.skill):
        raise InvalidArguments(
            {
                "callback_url": f"skill {body.skill!r} has no callback secret: set "
                "callback_secret_env in its file, and that variable on the server"
            }
        )


router = APIRouter(
    prefix="/api/requests",
    route_class=BoundedJsonRoute,
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 422),
    tags=["requests"],
)


@router.post(
    "",
    status_code=201,
    response_model=RequestState,
    responses={
        200: {"model": RequestState, "description": "Seen before"},
        **errors(400, 408, 409, 413),
    },
)
async def create(
    body: RequestBody,
    deps: Deps,
    response: Response,
    idempotency_key: IdempotencyKey = None,
    who: Principal = ASKING,
) -> RequestState:
    """Ask a person: an approval of a tool call, or a question. Rules and grants of the skill
    may decide it at once (the answer says so)."""
    _check_callback(deps, body)
    state, created = await deps.requests.create(
        new_request(body), by=who, idempotency_key=idempotency_key
    )
    if not created:
        response.status_code = 200
    response.headers["Location"] = f"/api/requests/{state.id}"
    return wire_state(state)


@router.get("/{request_id}", response_model=RequestState, responses=errors(404))
async def get(
    request_id: str,
    deps: Deps,
    wait: float = Query(0, ge=0, le=MAX_WAIT),
    who: Principal = ASKING,
) -> RequestState:
    """The request's state; with `wait`, held until it is decided (or halted by the kill
    switch) or the wait ends. An ask token sees only its own requests."""
    if wait > 0:
        return wire_state(await deps.requests.wait(request_id, wait, by=who))
    return wire_state(await deps.requests.get(request_id, by=who))


@router.post("/{request_id}/cancel", response_model=RequestState, responses=errors(404))
async def cancel(request_id: str, deps: Deps, who: Principal = ASKING) -> RequestState:
    """Withdraw the request while it is pending: its item is closed (`expired`, the reason
    "withdrawn by ..."), every card says so. One decided first keeps its decision; either
    way its state is the answer. An ask token withdraws only its own requests."""
    return wire_state(await deps.requests.withdraw(request_id, by=who))
