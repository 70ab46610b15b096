"""The away API under /api/away (bearer token): who is away, and who decides for them.

    GET    /api/away                 {"items": [away]}: everyone away now
    POST   /api/away                 {"delegate", "until", "person"?} → away
    DELETE /api/away?person=NAME     the away that ended now (404: they were not away)

A `decide` token speaks for the person it names, and only of them; an admin (the owner, an
admin token) may name any person. See `pizzabot.agent.policy.away`.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from pizzabot.agent.policy.away import Away, AwayAccess
from pizzabot.agent.policy.away_desk import away_list, come_back, go_away
from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import DECIDING, caller


class AwayIn(BaseModel):
    #: Whose away (default: the caller's own person); only an admin names someone else.
    person: str | None = Field(default=None, max_length=200)
    #: The person who decides meanwhile (a name from `people:`).
    delegate: str = Field(max_length=200)
    #: When the away ends by itself: an ISO 8601 time with its zone.
    until: datetime


class AwayOut(BaseModel):
    person: str
    delegate: str
    until: str
    set_by: str
    set_at: str


class AwayList(BaseModel):
    items: list[AwayOut]


def away_out(away: Away) -> AwayOut:
    return AwayOut(
        person=away.person,
        delegate=away.delegate,
        until=away.until.isoformat(),
        set_by=away.set_by,
        set_at=away.set_at.isoformat(),
    )


def desk(deps: ApiDeps) -> AwayAccess:
    if not isinstance(deps.access, AwayAccess):
        raise HTTPException(404, "this server keeps no away states")
    return deps.access


router = APIRouter(
    prefix="/api/away",
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 404, 422),
)


@router.get("", response_model=AwayList, dependencies=[DECIDING])
async def list_away(deps: Deps) -> AwayList:
    """Everyone who is away now, and their delegates."""
    return AwayList(items=[away_out(a) for a in await away_list(desk(deps))])


@router.post("", response_model=AwayOut, responses=errors(400, 408, 413))
async def set_away(body: AwayIn, deps: Deps, who: Principal = DECIDING) -> AwayOut:
    """Say a person is away until `until`: their cards go to `delegate`, who decides for
    them what they may decide."""
    away = await go_away(
        desk(deps),
        deps.store,
        by=who,
        delegate=body.delegate,
        until=body.until,
        person=body.person,
    )
    return away_out(away)


@router.delete("", response_model=AwayOut)
async def end_away(deps: Deps, person: str | None = None, who: Principal = DECIDING) -> AwayOut:
    """Say a person is back: their cards come to them again."""
    ended = await come_back(desk(deps), deps.store, by=who, person=person)
    if ended is None:
        raise HTTPException(404, f"{person or 'you'} were not away")
    return away_out(ended)
