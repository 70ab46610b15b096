"""Schedules as the API and the web page show them: each with its next fire times in its own
timezone and its latest fire, or the reason it cannot fire."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pizzabot.agent.schedules import FireRecord, ScheduleRecord, ScheduleStore
from pizzabot.channels.triggers.schedule_times import build_trigger, next_fires


def fire_json(f: FireRecord) -> dict[str, Any]:
    return {
        "fire_time": f.fire_time.isoformat(),
        "status": f.status,
        "run_id": f.run_id,
        "detail": f.detail,
    }


def schedule_json(
    rec: ScheduleRecord, *, last: FireRecord | None, now: datetime, count: int = 3
) -> dict[str, Any]:
    """One schedule; `next_fire_times` is empty while it is paused or broken."""
    error: str | None = None
    upcoming: list[str] = []
    try:
        trigger = build_trigger(rec.cron, rec.every_seconds, rec.timezone)
    except ValueError as exc:
        error = str(exc)
    else:
        if not rec.paused:
            tz = ZoneInfo(rec.timezone)
            upcoming = [t.astimezone(tz).isoformat() for t in next_fires(trigger, now, count)]
    return {
        "id": rec.id,
        "skill": rec.skill,
        "source": rec.source,
        "cron": rec.cron,
        "every_seconds": rec.every_seconds,
        "input": rec.input,
        "timezone": rec.timezone,
        "misfire": rec.misfire,
        "paused": rec.paused,
        "created_at": rec.created_at.isoformat(),
        "next_fire_times": upcoming,
        "last_fire": fire_json(last) if last else None,
        "error": error,
    }


async def schedules_json(
    triggers: ScheduleStore, *, errors: list[dict[str, str]], now: datetime
) -> dict[str, Any]:
    """Every schedule, and the skill schedules that could not be loaded (`errors`)."""
    last = await triggers.last_fires()
    return {
        "items": [
            schedule_json(r, last=last.get(r.id), now=now) for r in await triggers.list_schedules()
        ],
        "errors": list(errors),
    }


async def schedule_detail_json(
    triggers: ScheduleStore, schedule_id: str, *, now: datetime
) -> dict[str, Any]:
    """One schedule with its next ten fire times and its recent fires (newest first)."""
    rec = await triggers.get_schedule(schedule_id)
    fires = await triggers.fires(schedule_id)
    out = schedule_json(rec, last=fires[0] if fires else None, now=now, count=10)
    out["fires"] = [fire_json(f) for f in fires]
    return out
