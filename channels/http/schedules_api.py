"""The schedules API under /api/schedules (bearer token), for the CLI and the web page.

    GET    /api/schedules              {"items": [schedule], "errors": [...]}
    POST   /api/schedules              {skill, cron | every, input, timezone, misfire} -> 201
    GET    /api/schedules/{id}         schedule + its recent "fires"
    POST   /api/schedules/{id}/pause   schedule
    POST   /api/schedules/{id}/resume  schedule
    DELETE /api/schedules/{id}         {"deleted": id}; 409 for a schedule from a skill file

A schedule carries `next_fire_times` (ISO 8601 in its own timezone) and `last_fire`
({fire_time, status, run_id, detail}).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ValidationError

from pizzabot.agent.errors import InvalidArguments
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.skills import Schedule
from pizzabot.channels.http import schema as out
from pizzabot.channels.http.deps import ApiDeps, Deps
from pizzabot.channels.http.schema import errors
from pizzabot.channels.http.scopes import ADMIN, caller
from pizzabot.channels.triggers.scheduler import Scheduler


class ScheduleIn(BaseModel):
    skill: str
    cron: str | None = None
    every: str | float | None = None  # "30m", "2h", or seconds
    input: str = ""
    timezone: str = "UTC"
    misfire: Literal["skip", "run_once"] = "skip"


def scheduler_of(deps: ApiDeps) -> Scheduler:
    if deps.scheduler is None:
        raise HTTPException(503, "schedules are not available on this server")
    return deps.scheduler


router = APIRouter(
    prefix="/api/schedules",
    tags=["schedules"],
    dependencies=[Depends(caller), ADMIN],
    responses=errors(401, 403, 422, 503),
)


@router.get("", response_model=out.ScheduleList)
async def list_schedules(deps: Deps) -> dict[str, Any]:
    return await scheduler_of(deps).list_json()


@router.post(
    "",
    status_code=201,
    response_model=out.ScheduleDetail,
    responses=errors(400, 404, 408, 409, 413),
)
async def add(body: ScheduleIn, deps: Deps, who: Principal = ADMIN) -> dict[str, Any]:
    sched = scheduler_of(deps)
    try:
        spec = Schedule.model_validate(body.model_dump(exclude={"skill"}))
    except ValidationError as exc:
        raise InvalidArguments(
            {".".join(str(p) for p in e["loc"]): e["msg"] for e in exc.errors()}
        ) from None
    rec = await sched.add(body.skill, spec, actor=who.actor)
    return await sched.get_json(rec.id)


@router.get("/{schedule_id}", response_model=out.ScheduleDetail, responses=errors(404))
async def get(schedule_id: str, deps: Deps) -> dict[str, Any]:
    return await scheduler_of(deps).get_json(schedule_id)


@router.post("/{schedule_id}/pause", response_model=out.ScheduleDetail, responses=errors(404))
async def pause(schedule_id: str, deps: Deps, who: Principal = ADMIN) -> dict[str, Any]:
    sched = scheduler_of(deps)
    await sched.set_paused(schedule_id, paused=True, actor=who.actor)
    return await sched.get_json(schedule_id)


@router.post("/{schedule_id}/resume", response_model=out.ScheduleDetail, responses=errors(404))
async def resume(schedule_id: str, deps: Deps, who: Principal = ADMIN) -> dict[str, Any]:
    sched = scheduler_of(deps)
    await sched.set_paused(schedule_id, paused=False, actor=who.actor)
    return await sched.get_json(schedule_id)


@router.delete("/{schedule_id}", response_model=out.Deleted, responses=errors(404, 409))
async def remove(schedule_id: str, deps: Deps, who: Principal = ADMIN) -> out.Deleted:
    await scheduler_of(deps).remove(schedule_id, actor=who.actor)
    return out.Deleted(deleted=schedule_id)
