"""The grants API under /api/grants (bearer token), for the CLI, scripts and the docs.

    GET    /api/grants          {"items": [grant]}; ?all=true adds revoked and expired ones
    GET    /api/grants/{id}     grant
    DELETE /api/grants/{id}     grant, revoked from the next call on (a second DELETE is a no-op)

A grant is made by an approval that asks for one (`POST /api/items/{id}/decision` with
`"grant": "run" | "1h" | "exact"`), when the run goes on with the approved call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel

from agent.policy.grants import Grant, Grants, revoke_grant
from agent.policy.principal import Principal
from bot.api import DECIDING, caller, services
from bot.api_schema import errors


class GrantOut(BaseModel):
    id: str
    skill: str
    tool: str
    #: As the approver chose it: "run", a duration ("1h"), "exact".
    choice: str
    scope: str
    #: What it covers, in words.
    covers: str
    granted_by: str
    granted_via: str
    granted_at: str
    run_id: str
    item_id: str
    fingerprint: str | None
    args: dict[str, Any] | None
    expires_at: str | None
    revoked_at: str | None
    revoked_by: str | None
    uses: int
    last_used_at: str | None
    #: Neither revoked nor expired (a `run` grant also ends with its run).
    holds: bool


class GrantList(BaseModel):
    items: list[GrantOut]


def grant_json(grant: Grant, now: datetime) -> dict[str, Any]:
    def at(value: Any) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "id": grant.id,
        "skill": grant.skill,
        "tool": grant.tool,
        "choice": grant.choice,
        "scope": grant.scope,
        "covers": grant.describe(),
        "granted_by": grant.granted_by,
        "granted_via": grant.granted_via,
        "granted_at": grant.granted_at.isoformat(),
        "run_id": grant.run_id,
        "item_id": grant.item_id,
        "fingerprint": grant.fingerprint,
        "args": grant.args,
        "expires_at": at(grant.expires_at),
        "revoked_at": at(grant.revoked_at),
        "revoked_by": grant.revoked_by,
        "uses": grant.uses,
        "last_used_at": at(grant.last_used_at),
        "holds": grant.holds(now),
    }


def grants_of(request: Request) -> Grants:
    grants = services(request).ctx.grants
    if grants is None:
        raise HTTPException(404, "this server keeps no grants")
    return grants


def router() -> APIRouter:
    api = APIRouter(
        prefix="/api/grants",
        dependencies=[Depends(caller)],
        responses=errors(401, 403, 422),
    )

    @api.get("", response_model=GrantList, responses=errors(404))
    async def list_grants(
        request: Request, all: bool = False, who: Principal = DECIDING
    ) -> dict[str, Any]:
        """The grants; a decide token sees those its person may revoke."""
        svc = services(request)
        now = svc.ctx.clock()
        found = await grants_of(request).list_grants(now=now, ended=all)
        mine = [g for g in found if svc.access.may_revoke(who, g.skill, g.tool)]
        return {"items": [grant_json(g, now) for g in mine]}

    @api.get("/{grant_id}", response_model=GrantOut, responses=errors(404), dependencies=[DECIDING])
    async def get_grant(grant_id: str, request: Request) -> dict[str, Any]:
        grant = await grants_of(request).get(grant_id)
        return grant_json(grant, services(request).ctx.clock())

    @api.delete("/{grant_id}", response_model=GrantOut, responses=errors(404))
    async def revoke(grant_id: str, request: Request, who: Principal = DECIDING) -> dict[str, Any]:
        svc = services(request)
        now = svc.ctx.clock()
        grant = await revoke_grant(
            grants_of(request), svc.access, svc.store, grant_id, by=who, now=now
        )
        return grant_json(grant, now)

    return api
