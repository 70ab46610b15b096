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

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel

from pizzabot.agent.policy.grants import Grant, Grants, revoke_grant
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import DECIDING, caller


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


def grant_out(grant: Grant, now: datetime) -> GrantOut:
    def at(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return GrantOut(
        id=grant.id,
        skill=grant.skill,
        tool=grant.tool,
        choice=grant.choice,
        scope=grant.scope,
        covers=grant.describe(),
        granted_by=grant.granted_by,
        granted_via=grant.granted_via,
        granted_at=grant.granted_at.isoformat(),
        run_id=grant.run_id,
        item_id=grant.item_id,
        fingerprint=grant.fingerprint,
        args=grant.args,
        expires_at=at(grant.expires_at),
        revoked_at=at(grant.revoked_at),
        revoked_by=grant.revoked_by,
        uses=grant.uses,
        last_used_at=at(grant.last_used_at),
        holds=grant.holds(now),
    )


def grants_of(deps: ApiDeps) -> Grants:
    if deps.grants is None:
        raise HTTPException(404, "this server keeps no grants")
    return deps.grants


router = APIRouter(
    prefix="/api/grants",
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 422),
)


@router.get("", response_model=GrantList, responses=errors(404))
async def list_grants(deps: Deps, all: bool = False, who: Principal = DECIDING) -> GrantList:
    """The grants; a decide token sees those its person may revoke."""
    now = deps.clock()
    found = await grants_of(deps).list_grants(now=now, ended=all)
    mine = [g for g in found if deps.access.may_revoke(who, g.skill, g.tool)]
    return GrantList(items=[grant_out(g, now) for g in mine])


@router.get("/{grant_id}", response_model=GrantOut, responses=errors(404), dependencies=[DECIDING])
async def get_grant(grant_id: str, deps: Deps) -> GrantOut:
    return grant_out(await grants_of(deps).get(grant_id), deps.clock())


@router.delete("/{grant_id}", response_model=GrantOut, responses=errors(404))
async def revoke(grant_id: str, deps: Deps, who: Principal = DECIDING) -> GrantOut:
    now = deps.clock()
    grant = await revoke_grant(grants_of(deps), deps.access, deps.store, grant_id, by=who, now=now)
    return grant_out(grant, now)
