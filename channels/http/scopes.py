"""Who is calling, and the least scope each route needs.

The token gate (`pizzabot.channels.http.guard.TokenGate`) turns a bearer token into a principal before
a byte of the body is read; `caller` hands it to the route and declares the bearer scheme in
the OpenAPI document. Every route names the least scope it needs with one of `ASKING`,
`DECIDING` or `ADMIN`: 403 otherwise, saying what the token's scope allows, and audited as
`scope_refused` with the principal and the route, like every other refusal. (What a principal
may do with that — which items it may decide — is the policy's answer, asked by the engine.)
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pizzabot.agent.policy.access import Act, Verdict, audit_refusal
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.channels.http.deps import Deps
from pizzabot.channels.http.guard import PRINCIPAL

__all__ = ["ADMIN", "ASKING", "DECIDING", "Caller", "caller", "needs"]

bearer = HTTPBearer(auto_error=False)


async def caller(
    request: Request, creds: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> Principal:
    """Who is calling, as the token gate found it before the body was read."""
    who = request.scope.get(PRINCIPAL)
    if creds is None or not isinstance(who, Principal):
        raise HTTPException(
            401, "missing or wrong API token", headers={"WWW-Authenticate": "Bearer"}
        )
    return who


Caller = Annotated[Principal, Depends(caller)]


def needs(scope: Scope) -> Any:
    """A route's dependency: 403 unless the caller's scope covers `scope`, saying what it
    does allow; the refusal is audited with the route asked for."""

    async def check(who: Caller, request: Request, deps: Deps) -> Principal:
        if not who.scope.covers(scope):
            why = (
                f"this token's scope is {who.scope}: it may {who.scope.allows()}; "
                f"this needs scope {scope}"
            )
            route = f"{request.method} {request.url.path}"[:300]
            verdict = Verdict(Act.SCOPE, who, False, why)
            await audit_refusal(deps.store, verdict, now=deps.clock(), detail={"route": route})
            raise HTTPException(403, why)
        return who

    check.__name__ = f"needs_{scope}"
    return Depends(check)


#: The least scope of each kind of route.
ASKING, DECIDING, ADMIN = needs(Scope.ASK), needs(Scope.DECIDE), needs(Scope.ADMIN)
