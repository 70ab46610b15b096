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

from fastapi import APIRouter, Depends, HTTPException, Request
from pydantic import BaseModel, ValidationError

from agent.errors import InvalidArguments
from agent.policy.principal import Principal
from agent.skills import Schedule
from bot import api_schema as out
from bot.api import ADMIN, caller, services
from bot.api_schema import errors
from bot.scheduler import Scheduler


class ScheduleIn(BaseModel):
    skill: str
    cron: str | None = None
    every: str | float | None = None  # "30m", "2h", or seconds
    input: str = ""
    timezone: str = "UTC"
    misfire: Literal["skip", "run_once"] = "skip"


def scheduler_of(request: Request) -> Scheduler:
    triggers = services(request).triggers
    if triggers is None:
        raise HTTPException(503, "schedules are not available on this server")
    return triggers.scheduler


def router() -> APIRouter:
    api = APIRouter(
        prefix="/api/schedules",
        tags=["schedules"],
        dependencies=[Depends(caller), ADMIN],
        responses=errors(401, 403, 422, 503),
    )

    @api.get("", response_model=out.ScheduleList)
    async def list_schedules(request: Request) -> dict[str, Any]:
        return await scheduler_of(request).list_json()

    @api.post(
        "",
        status_code=201,
        response_model=out.ScheduleDetail,
        responses=errors(400, 404, 408, 409, 413),
    )
    async def add(body: ScheduleIn, request: Request, who: Principal = ADMIN) -> dict[str, Any]:
        sched = scheduler_of(request)
        try:
            spec = Schedule.model_validate(body.model_dump(exclude={"skill"}))
        except ValidationError as exc:
            raise InvalidArguments(
                {".".join(str(p) for p in e["loc"]): e["msg"] for e in exc.errors()}
            ) from None
        rec = await sched.add(body.skill, spec, actor=who.actor)
        return await sched.get_json(rec.id)

    @api.get("/{schedule_id}", response_model=out.ScheduleDetail, responses=errors(404))
    async def get(schedule_id: str, request: Request) -> dict[str, Any]:
        return await scheduler_of(request).get_json(schedule_id)

    @api.post("/{schedule_id}/pause", response_model=out.ScheduleDetail, responses=errors(404))
    async def pause(schedule_id: str, request: Request, who: Principal = ADMIN) -> dict[str, Any]:
        sched = scheduler_of(request)
        await sched.set_paused(schedule_id, paused=True, actor=who.actor)
        return await sched.get_json(schedule_id)

    @api.post("/{schedule_id}/resume", response_model=out.ScheduleDetail, responses=errors(404))
    async def resume(schedule_id: str, request: Request, who: Principal = ADMIN) -> dict[str, Any]:
        sched = scheduler_of(request)
        await sched.set_paused(schedule_id, paused=False, actor=who.actor)
        return await sched.get_json(schedule_id)

    @api.delete("/{schedule_id}", response_model=out.Deleted, responses=errors(404, 409))
    async def remove(schedule_id: str, request: Request, who: Principal = ADMIN) -> dict[str, Any]:
        await scheduler_of(request).remove(schedule_id, actor=who.actor)
        return {"deleted": schedule_id}

    return api
