"""Named tokens under /api/tokens (admins only):

    POST   /api/tokens        {"name", "scope": "ask"|"decide"|"admin", "person"?}
                              → 201 {"id", "name", "scope", "person", "token", ...}: the secret
                              is in this answer and nowhere else, ever
    GET    /api/tokens        {"items": [token]} (never a secret), revoked ones too
    DELETE /api/tokens/{id}   the token, revoked: refused at once by every server

Routes only translate; who may do this, and the audit, are `pizzabot.agent.policy.tokens.TokenDesk`'s.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.policy.tokens import Token
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ADMIN, caller


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=100)]
    scope: Scope
    #: The person (`people:`) a decide token decides as; an ask token may name who it asks for.
    person: Annotated[str | None, Field(min_length=1, max_length=200)] = None


class TokenOut(BaseModel):
    id: str
    name: str
    scope: Scope
    person: str | None
    created_at: str
    created_by: str
    revoked_at: str | None
    revoked_by: str | None


class NewTokenOut(TokenOut):
    #: The secret: shown in this answer only. Present it as `Authorization: Bearer <token>`.
    token: str


class TokenList(BaseModel):
    items: list[TokenOut]


def token_json(token: Token) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "scope": str(token.scope),
        "person": token.person,
        "created_at": token.created_at.isoformat(),
        "created_by": token.created_by,
        "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None,
        "revoked_by": token.revoked_by,
    }


router = APIRouter(
    prefix="/api/tokens",
    route_class=BoundedJsonRoute,
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 422),
    tags=["tokens"],
)


@router.post("", status_code=201, response_model=NewTokenOut, responses=errors(400, 408, 409, 413))
async def create(body: TokenIn, deps: Deps, who: Principal = ADMIN) -> dict[str, Any]:
    """Make a named token; its secret is in this answer only."""
    made = await deps.tokens.create(name=body.name, scope=body.scope, person=body.person, by=who)
    return {**token_json(made.token), "token": made.secret}


@router.get("", response_model=TokenList)
async def list_tokens(deps: Deps, who: Principal = ADMIN) -> dict[str, Any]:
    found = await deps.tokens.list_tokens(by=who)
    return {"items": [token_json(t) for t in found]}


@router.delete("/{token_id}", response_model=TokenOut, responses=errors(404))
async def revoke(token_id: str, deps: Deps, who: Principal = ADMIN) -> dict[str, Any]:
    return token_json(await deps.tokens.revoke(token_id, by=who))
