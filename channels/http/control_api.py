"""Keeping the server under control, under /api: the kill switch, what this process does,
the skills (and reloading them), the audit trail.

    GET/POST/DELETE /api/kill    the global kill switch (on: {"reason"?}; admins only)
    GET  /api/status             this process: database, worker, singletons, outbox (admins)
    GET  /api/skills             the skills loaded, and the files refused with their lines
    POST /api/skills/reload      the skills folder read again now (admins)
    GET  /api/audit              the audit trail, newest first (?limit=; admins)
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from pizzabot.agent.policy.principal import Principal
from pizzabot.channels.http import schema as out
from pizzabot.channels.http.answers import audit_out, skills_out
from pizzabot.channels.http.bodies import BoundedJsonRoute
from pizzabot.channels.http.deps import Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ADMIN, DECIDING, caller

__all__ = ["router"]

router = APIRouter(
    prefix="/api",
    route_class=BoundedJsonRoute,
    dependencies=[Depends(caller)],
    responses=errors(401, 403, 422),
)


class KillIn(BaseModel):
    #: Why: what every held request's agent and every refused decision is told.
    reason: str | None = Field(default=None, max_length=500)


@router.get("/kill", response_model=out.KillState, dependencies=[DECIDING])
async def kill_state(deps: Deps) -> dict[str, Any]:
    state = await deps.store.get_kill()
    return {"on": state is not None, **(state or {})}


@router.post("/kill", response_model=out.KillOn)
async def kill(deps: Deps, body: KillIn | None = None, who: Principal = ADMIN) -> out.KillOn:
    reason = body.reason if body is not None else None
    return out.KillOn(on=True, killed=await deps.runs.kill(by=who, reason=reason))


@router.delete("/kill", response_model=out.KillOff)
async def lift(deps: Deps, who: Principal = ADMIN) -> out.KillOff:
    await deps.runs.lift_kill(by=who)
    return out.KillOff(on=False)


@router.get("/status", response_model=out.Status, dependencies=[ADMIN])
async def status(deps: Deps) -> dict[str, Any]:
    """What this process does: its worker, the singletons it leads, the kill switch; and the
    deliveries the outbox gave up."""
    return await deps.status()


@router.get("/skills", response_model=out.SkillList, dependencies=[DECIDING])
async def skills(deps: Deps) -> out.SkillList:
    """The skills loaded, and the files refused (each problem with its line)."""
    return skills_out(deps.skills, watch_seconds=deps.skill_folder.interval)


@router.post("/skills/reload", response_model=out.SkillReload)
async def reload_skills(deps: Deps, who: Principal = ADMIN) -> out.SkillReload:
    """Load the skills folder again now (the server also does on every change)."""
    change = await deps.skill_folder.reload(actor=who.actor, channel=who.channel)
    listing = skills_out(deps.skills, watch_seconds=deps.skill_folder.interval)
    changes = out.SkillChanges(added=change.added, changed=change.changed, removed=change.removed)
    return out.SkillReload(**listing.model_dump(), changes=changes)


@router.get("/audit", response_model=out.AuditList, dependencies=[ADMIN])
async def audit(deps: Deps, limit: int = Query(200, ge=1, le=5000)) -> out.AuditList:
    return out.AuditList(items=[audit_out(e) for e in await deps.store.audit_log(limit=limit)])
