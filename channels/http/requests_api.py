"""Requests from agents Pizza Bot does not run, under /api/requests (bearer token).

    POST /api/requests           an approval {"skill", "title", "tool", "args", "schema"?,
                                 "risk"?, "description"?, "timeout"?, "callback_url"?}, or a
                                 question {"skill", "title", "question", "schema"?, ...}
                                 → 201 the request's state (200: the Idempotency-Key was seen
                                 with this body; 409: with another body)
    GET  /api/requests/{id}      the request's state; ?wait=SECONDS (up to 60) answers once
                                 it is decided, or when the wait ends (still pending)

The state: {"id", "item_id", "kind", "status", "args", "reason", "decided_by", "via",
"decided_at", "url", "requested_by"}; `status` is `halted` while the kill switch is on. An
`ask` token files requests and reads its own; nothing else. The item is decided like any other (`POST /api/items/{id}/decision`,
or on any channel). A `callback_url` receives the same body, signed, when it is decided
(`pizzabot.channels.callback`); its secret is the environment variable the skill's
`callback_secret_env` names, on the server.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Header, Query, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pizzabot.agent.errors import InvalidArguments
from pizzabot.agent.model import Risk
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.requests import MAX_TIMEOUT, NewRequest
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ASKING, caller

#: The longest `?wait=` (seconds): a proxy between may cut a longer request.
MAX_WAIT = 60.0
#: A callback URL longer than this is refused.
MAX_URL = 300


class RiskIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    impact: Literal["low", "medium", "high"] | None = None
    reversible: bool | None = None
    scope: Annotated[str | None, Field(max_length=200)] = None


class RequestIn(BaseModel):
    """An approval (`tool`, `args`) or a question (`question`) for an inbox-only skill."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    skill: Annotated[str, Field(min_length=1, max_length=200)]
    title: Annotated[str, Field(min_length=1, max_length=200)]
    tool: Annotated[str | None, Field(min_length=1, max_length=300)] = None
    args: dict[str, Any] = {}
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    risk: RiskIn | None = None
    description: Annotated[str | None, Field(max_length=4000)] = None
    timeout: Annotated[float | None, Field(ge=1, le=MAX_TIMEOUT)] = None
    callback_url: Annotated[str | None, Field(max_length=MAX_URL)] = None
    question: Annotated[str | None, Field(min_length=1, max_length=4000)] = None

    @field_validator("callback_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            parts = urlsplit(v)
            port = parts.port
        except ValueError:
            raise ValueError("not a URL") from None
        del port  # read only to refuse a bad one
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("no user or password in the URL: the body is signed instead")
        if any(c.isspace() or ord(c) < 32 for c in v):
            raise ValueError("no spaces or control characters")
        return v

    @model_validator(mode="after")
    def _approval_or_question(self) -> RequestIn:
        if self.tool is None and self.question is None:
            raise ValueError("give tool (and args) for an approval, or question for a question")
        if self.tool is not None and self.question is not None:
            raise ValueError("give tool or question, not both")
        return self

    def new(self) -> NewRequest:
        risk = Risk(**self.risk.model_dump()) if self.risk is not None else None
        return NewRequest(
            skill=self.skill,
            title=self.title,
            tool=self.tool,
            args=self.args,
            schema=self.schema_,
            risk=risk,
            description=self.description,
            timeout=self.timeout,
            callback_url=self.callback_url,
            question=self.question,
        )


class RequestOut(BaseModel):
    id: str
    item_id: str
    kind: Literal["approval", "question"]
    #: approval: pending|approved|edited|rejected|expired; question: pending|answered|
    #: declined|expired; either: halted (the kill switch is on: do not go ahead).
    status: str
    #: The arguments to run with (approved, edited) or the answer (answered); else null.
    args: dict[str, Any] | None
    reason: str | None
    decided_by: str | None
    via: str | None
    decided_at: str | None
    #: The item's page on the web inbox.
    url: str
    #: Who asked (the token's person, `token:NAME`, or `owner`).
    requested_by: str | None = None


IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", max_length=200, pattern=r"^[\x21-\x7e]+$"),
]


def _check_callback(deps: ApiDeps, body: RequestIn) -> None:
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
    response_model=RequestOut,
    responses={
        200: {"model": RequestOut, "description": "Seen before"},
        **errors(400, 408, 409, 413),
    },
)
async def create(
    body: RequestIn,
    deps: Deps,
    response: Response,
    idempotency_key: IdempotencyKey = None,
    who: Principal = ASKING,
) -> dict[str, Any]:
    """Ask a person: an approval of a tool call, or a question. Rules and grants of the skill
    may decide it at once (the answer says so)."""
    _check_callback(deps, body)
    state, created = await deps.requests.create(body.new(), by=who, idempotency_key=idempotency_key)
    if not created:
        response.status_code = 200
    response.headers["Location"] = f"/api/requests/{state.id}"
    return state.as_json()


@router.get("/{request_id}", response_model=RequestOut, responses=errors(404))
async def get(
    request_id: str,
    deps: Deps,
    wait: float = Query(0, ge=0, le=MAX_WAIT),
    who: Principal = ASKING,
) -> dict[str, Any]:
    """The request's state; with `wait`, held until it is decided (or halted by the kill
    switch) or the wait ends. An ask token sees only its own requests."""
    if wait > 0:
        return (await deps.requests.wait(request_id, wait, by=who)).as_json()
    return (await deps.requests.get(request_id, by=who)).as_json()
