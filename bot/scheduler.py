"""Schedules: cron or interval fires that start runs, each fire at most once.

APScheduler (an `AsyncIOScheduler` with an in-memory job store rebuilt from the database)
decides *when* a schedule is due; the database decides *whether* the fire happens. A fire is
named by its scheduled time, never by the clock that noticed it, and the row (schedule, fire
time) is unique: a restart, a clock jump or a second server on the same PostgreSQL inserts
nothing the second time. A fire only inserts a run (`Runs.start`); workers do the rest.

    claim the fire row ──duplicate──> nothing
          │ claimed
    Runs.start(idempotency_key="schedule:<id>:<fire time>") ─> fire row gets the run id

A crash between the two steps leaves a "claimed" row; `recover` finishes it later, and the
idempotency key makes that safe even if the run had already been inserted.

Misfires — fire times that passed while no server ran, or a process stalled longer than the
grace period — follow the schedule's policy: `skip`, or `run_once` (one run for the latest
missed time, however many were missed). Paused time is not missed time.

`every:` intervals count from 1970-01-01 00:00 UTC (so `every: 30m` fires at :00 and :30),
which lets every server compute the same fire times without agreeing on a start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.executors.base import BaseExecutor
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from agent.context import new_id, utcnow
from agent.errors import Conflict, InvalidArguments, KillSwitchOn, NotFound
from agent.runs import Runs
from agent.skills import Schedule, SkillBook
from store.triggers import FireRecord, ScheduleRecord, TriggerStore

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)

FireStatus = Literal["started", "duplicate", "skipped", "refused", "failed", "paused", "missing"]


@dataclass(frozen=True)
class FireResult:
    schedule_id: str
    fire_time: datetime
    status: FireStatus
    run_id: str | None = None
    detail: str | None = None


# -- fire times ----------------------------------------------------------------------------


def build_trigger(cron: str | None, every: float | None, timezone: str) -> BaseTrigger:
    """The APScheduler trigger of a schedule; ValueError says what is wrong with it."""
    try:
        tz = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {timezone!r} (use a name like Europe/Amsterdam)"
        ) from None
    if (cron is None) == (every is None):
        raise ValueError("a schedule needs exactly one of cron or every")
    if cron is not None:
        try:
            fields = cron.split()
            if len(fields) != 5:
                raise ValueError(f"{len(fields)} fields instead of 5")
            minute, hour, day, month, weekday = fields
            return CronTrigger(
                minute=minute,
                hour=hour,
                day=day,
                month=month,
                day_of_week=cron_weekdays(weekday),
                timezone=tz,
            )
        except ValueError as exc:
            raise ValueError(
                f"cron {cron!r}: {exc} (five fields: min hour day month weekday)"
            ) from None
    assert every is not None
    if every < 1 or every != int(every):
        raise ValueError("every must be a whole number of seconds, at least 1s")
    return IntervalTrigger(seconds=int(every), start_date=EPOCH, timezone=UTC)


_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


def _day_number(token: str) -> int:
    token = token.strip().lower()
    if token in _DAYS:
        return _DAYS.index(token)
    if token.isdigit() and int(token) <= 7:
        return int(token) % 7
    raise ValueError(f"weekday {token!r}: use 0-7 (0 and 7 are Sunday) or sun..sat")


def cron_weekdays(field: str) -> str:
    """A crontab weekday field (0 or 7 = Sunday) as APScheduler 3 reads it (0 = Monday).

    APScheduler 3's `from_crontab` keeps its own numbering, so "1-5" would mean Tuesday to
    Saturday; the field is spelled out as day names instead.
    """
    if field.strip() == "*":
        return "*"
    days: set[int] = set()
    for part in field.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text.isdigit() and int(step_text) > 0 else None
        if step_text and step is None:
            raise ValueError(f"weekday step {step_text!r}")
        if span == "*":
            first, last = 0, 6
        elif "-" in span:
            a, b = span.split("-", 1)
            first, last = _day_number(a), _day_number(b)
            if b.strip() == "7":
                last = 7  # "5-7" is Friday to Sunday
            if last < first:
                raise ValueError(f"weekday range {span!r} runs backwards")
        else:
            first = last = _day_number(span)
        days.update(d % 7 for d in range(first, last + 1, step or 1))
    return ",".join(_DAYS[d] for d in sorted(days))


def fire_key(t: datetime) -> datetime:
    """A fire time as stored: UTC, whole seconds, so every server names a fire the same way."""
    return t.astimezone(UTC).replace(microsecond=0)


def next_fires(trigger: BaseTrigger, now: datetime, count: int = 3) -> list[datetime]:
    out: list[datetime] = []
    t: datetime | None = trigger.get_next_fire_time(None, now)
    while t is not None and len(out) < count:
        out.append(t)
        t = trigger.get_next_fire_time(t, t + _MICRO)
    return out


def latest_fire(trigger: BaseTrigger, after: datetime, now: datetime) -> datetime | None:
    """The latest fire time t with after < t <= now, or None.

    Searches backwards from `now` in doubling windows, so a long downtime under a frequent
    schedule costs a few steps, not one per missed fire.
    """
    low = after + _MICRO
    if low > now:
        return None
    span = timedelta(minutes=1)
    while True:
        start = max(low, now - span)
        t: datetime | None = trigger.get_next_fire_time(None, start)
        if t is not None and t <= now:
            while True:
                following: datetime | None = trigger.get_next_fire_time(t, t + _MICRO)
                if following is None or following > now:
                    return t
                t = following
        if start == low:
            return None
        span *= 2


def skill_schedule_id(skill: str, spec: Schedule) -> str:
    """A skill schedule's id is a digest of its definition: unchanged → same row (and pause)."""
    text = json.dumps([skill, spec.model_dump()], sort_keys=True)
    return f"{skill[:40]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def record_trigger(rec: ScheduleRecord) -> BaseTrigger:
    return build_trigger(rec.cron, rec.every_seconds, rec.timezone)


# -- APScheduler glue ----------------------------------------------------------------------


class _FireExecutor(BaseExecutor):  # type: ignore[misc]
    """Hands each due fire time to `Scheduler.due`: APScheduler says when, we say whether.

    APScheduler's own executors call the job function without the scheduled time; the fire
    time is what makes a fire unique, so this executor passes it on.
    """

    def __init__(self, due: Callable[[str, datetime], Awaitable[FireResult]]) -> None:
        super().__init__()
        self._due = due
        self._tasks: set[asyncio.Task[None]] = set()

    def shutdown(self, wait: bool = True) -> None:
        for task in self._tasks:
            task.cancel()

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        task = asyncio.get_running_loop().create_task(self._run(job.id, list(run_times)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, job_id: str, run_times: list[datetime]) -> None:
        try:
            for t in run_times:
                await self._due(job_id, t)
        except Exception:
            log.exception("schedule %s: fire failed", job_id)
        finally:
            self._run_job_success(job_id, [])


def _noop() -> None:
    """The job function APScheduler requires; `_FireExecutor` never calls it."""


# -- the scheduler -------------------------------------------------------------------------


class Scheduler:
    def __init__(
        self,
        *,
        runs: Runs,
        triggers: TriggerStore,
        skills: SkillBook,
        clock: Callable[[], datetime] = utcnow,
        grace_seconds: float = 60.0,
        sync_interval: float = 30.0,
    ) -> None:
        self.runs = runs
        self.triggers = triggers
        self.skills = skills
        self.clock = clock
        self.grace = timedelta(seconds=grace_seconds)
        self.sync_interval = sync_interval
        #: Skill schedules that could not be loaded, by skill: shown in the API.
        self.errors: list[dict[str, str]] = []
        self._aps: Any = None

    # -- firing --------------------------------------------------------------------------

    async def fire(
        self, schedule_id: str, fire_time: datetime, *, detail: str | None = None
    ) -> FireResult:
        """Start the run of one fire, unless that fire happened already (here or elsewhere)."""
        t = fire_key(fire_time)
        claim = await self.triggers.claim_fire(schedule_id, t, now=self.clock(), detail=detail)
        if claim != "claimed":
            return FireResult(schedule_id, t, claim)
        return await self._start(schedule_id, t, detail=detail)

    async def _start(
        self, schedule_id: str, t: datetime, *, detail: str | None = None
    ) -> FireResult:
        finish = self.triggers.finish_fire
        try:
            rec = await self.triggers.get_schedule(schedule_id)
            run = await self.runs.start(
                rec.skill,
                rec.input,
                trigger=f"schedule:{schedule_id}",
                actor=f"schedule:{schedule_id}",
                idempotency_key=f"schedule:{schedule_id}:{t.isoformat()}",
            )
        except KillSwitchOn as exc:
            await finish(schedule_id, t, status="refused", detail=str(exc), now=self.clock())
            return FireResult(schedule_id, t, "refused", detail=str(exc))
        except NotFound as exc:
            await finish(schedule_id, t, status="failed", detail=str(exc), now=self.clock())
            log.error("schedule %s: %s", schedule_id, exc)
            return FireResult(schedule_id, t, "failed", detail=str(exc))
        await finish(
            schedule_id, t, status="started", run_id=run.id, detail=detail, now=self.clock()
        )
        log.info("schedule %s fired for %s: run %s", schedule_id, t.isoformat(), run.id)
        return FireResult(schedule_id, t, "started", run_id=run.id, detail=detail)

    async def due(self, schedule_id: str, fire_time: datetime) -> FireResult:
        """A fire time came: on time, fire; later than the grace period, follow the policy."""
        t = fire_key(fire_time)
        now = self.clock()
        if now - t <= self.grace:
            return await self.fire(schedule_id, t)
        try:
            rec = await self.triggers.get_schedule(schedule_id)
        except NotFound:
            return FireResult(schedule_id, t, "missing")
        if rec.misfire == "run_once":
            late = f"missed by {_human(now - t)}; misfire policy: run_once"
            return await self.fire(schedule_id, t, detail=late)
        detail = f"missed by {_human(now - t)}; misfire policy: skip"
        claim = await self.triggers.claim_fire(
            schedule_id, t, now=now, status="skipped", detail=detail
        )
        if claim == "claimed":
            log.info("schedule %s: skipped the fire of %s (%s)", schedule_id, t, detail)
            return FireResult(schedule_id, t, "skipped", detail=detail)
        return FireResult(schedule_id, t, claim)

    async def catch_up(self) -> list[FireResult]:
        """Apply the misfire policy to the latest fire time each schedule missed while down."""
        now = self.clock()
        last = await self.triggers.last_fires()
        results: list[FireResult] = []
        for rec in await self.triggers.list_schedules():
            if rec.paused:
                continue
            try:
                trigger = record_trigger(rec)
            except ValueError:
                continue
            previous = last.get(rec.id)
            after = max(rec.active_since, previous.fire_time if previous else EPOCH)
            t = latest_fire(trigger, after, now)
            if t is not None:
                results.append(await self.due(rec.id, t))
        return results

    async def recover(self, *, older_than: float = 60.0) -> list[FireResult]:
        """Finish fires whose process died after claiming them (the run key makes it safe)."""
        before = self.clock() - timedelta(seconds=older_than)
        return [
            await self._start(f.schedule_id, f.fire_time)
            for f in await self.triggers.stale_claims(before=before)
        ]

    # -- keeping APScheduler in step with the database -----------------------------------

    async def sync(self) -> None:
        """Skill files → schedule rows; schedule rows → APScheduler jobs (when running)."""
        now = self.clock()
        wanted: dict[str, ScheduleRecord] = {}
        errors: list[dict[str, str]] = []
        for skill in self.skills.all():
            for spec in skill.schedules:
                try:
                    build_trigger(spec.cron, spec.every, spec.timezone)
                except ValueError as exc:
                    errors.append({"skill": skill.name, "message": str(exc)})
                    continue
                sid = skill_schedule_id(skill.name, spec)
                wanted[sid] = ScheduleRecord(
                    id=sid,
                    skill=skill.name,
                    source="skill",
                    cron=spec.cron,
                    every_seconds=spec.every,
                    input=spec.input,
                    timezone=spec.timezone,
                    misfire=spec.misfire,
                    paused=False,
                    created_at=now,
                    updated_at=now,
                    active_since=now,
                )
        for e in errors:
            if e not in self.errors:
                log.error("skill %s: schedule not loaded: %s", e["skill"], e["message"])
        self.errors = errors
        await self.triggers.sync_skill_schedules(list(wanted.values()))
        await self._reconcile()

    async def _reconcile(self) -> None:
        if self._aps is None:
            return
        active: dict[str, ScheduleRecord] = {
            r.id: r for r in await self.triggers.list_schedules() if not r.paused
        }
        jobs = {job.id for job in self._aps.get_jobs()}
        for job_id in jobs - set(active):
            with contextlib.suppress(Exception):
                self._aps.remove_job(job_id)
        for sid in set(active) - jobs:
            try:
                trigger = record_trigger(active[sid])
            except ValueError as exc:
                log.error("schedule %s: %s", sid, exc)
                continue
            self._aps.add_job(
                _noop,
                trigger,
                id=sid,
                name=f"schedule {sid}",
                coalesce=True,
                misfire_grace_time=None,  # lateness is judged by `due`, per the schedule's policy
                max_instances=10,  # fires of different times never collide
            )

    async def start(self) -> None:
        """Load the schedules, finish interrupted fires, apply misfire policies, then tick."""
        await self.sync()
        await self.recover()
        await self.catch_up()
        aps = AsyncIOScheduler(timezone=UTC, executors={"default": _FireExecutor(self.due)})
        aps.start()
        self._aps = aps
        await self._reconcile()

    async def run_forever(self) -> None:
        """Pick up schedules added, paused or removed by other servers, and stale claims."""
        while True:
            await asyncio.sleep(self.sync_interval)
            try:
                await self.sync()
                await self.recover()
            except Exception:
                log.exception("schedule sync failed")

    async def stop(self) -> None:
        aps, self._aps = self._aps, None
        if aps is not None and aps.running:
            aps.shutdown(wait=False)
            await asyncio.sleep(0)  # APScheduler shuts down on the next loop turn

    @property
    def running(self) -> bool:
        return self._aps is not None

    # -- managing schedules (API, CLI) ---------------------------------------------------

    async def add(self, skill: str, spec: Schedule, *, actor: str = "owner") -> ScheduleRecord:
        self.skills.get(skill)  # NotFound for an unknown skill
        try:
            build_trigger(spec.cron, spec.every, spec.timezone)
        except ValueError as exc:
            raise InvalidArguments({"": str(exc)}) from None
        now = self.clock()
        rec = await self.triggers.add_schedule(
            ScheduleRecord(
                id=new_id(),
                skill=skill,
                source="api",
                cron=spec.cron,
                every_seconds=spec.every,
                input=spec.input,
                timezone=spec.timezone,
                misfire=spec.misfire,
                paused=False,
                created_at=now,
                updated_at=now,
                active_since=now,
            )
        )
        await self._audit("schedule_added", rec.id, actor, {"skill": skill, **spec.model_dump()})
        await self._reconcile()
        return rec

    async def set_paused(
        self, schedule_id: str, *, paused: bool, actor: str = "owner"
    ) -> ScheduleRecord:
        rec = await self.triggers.set_paused(schedule_id, paused=paused, now=self.clock())
        await self._audit("schedule_paused" if paused else "schedule_resumed", rec.id, actor, {})
        await self._reconcile()
        return rec

    async def remove(self, schedule_id: str, *, actor: str = "owner") -> None:
        rec = await self.triggers.get_schedule(schedule_id)
        if rec.source == "skill":
            raise Conflict(
                f"schedule {schedule_id} comes from the file of skill {rec.skill!r}: "
                "remove it there, or pause it"
            )
        await self.triggers.delete_schedule(schedule_id)
        await self._audit("schedule_removed", schedule_id, actor, {"skill": rec.skill})
        await self._reconcile()

    async def _audit(
        self, action: str, schedule_id: str, actor: str, detail: dict[str, Any]
    ) -> None:
        await self.triggers.store.audit(
            action=action,
            actor=actor,
            channel="api",
            now=self.clock(),
            detail={"schedule": schedule_id, **detail},
        )

    # -- what the API shows --------------------------------------------------------------

    def describe(
        self, rec: ScheduleRecord, *, last: FireRecord | None, count: int = 3
    ) -> dict[str, Any]:
        error: str | None = None
        upcoming: list[str] = []
        try:
            trigger = record_trigger(rec)
        except ValueError as exc:
            error = str(exc)
        else:
            if not rec.paused:
                tz = ZoneInfo(rec.timezone)
                upcoming = [
                    t.astimezone(tz).isoformat() for t in next_fires(trigger, self.clock(), count)
                ]
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

    async def list_json(self) -> dict[str, Any]:
        last = await self.triggers.last_fires()
        return {
            "items": [
                self.describe(r, last=last.get(r.id)) for r in await self.triggers.list_schedules()
            ],
            "errors": list(self.errors),
        }

    async def get_json(self, schedule_id: str) -> dict[str, Any]:
        rec = await self.triggers.get_schedule(schedule_id)
        fires = await self.triggers.fires(schedule_id)
        out = self.describe(rec, last=fires[0] if fires else None, count=10)
        out["fires"] = [fire_json(f) for f in fires]
        return out


def fire_json(f: FireRecord) -> dict[str, Any]:
    return {
        "fire_time": f.fire_time.isoformat(),
        "status": f.status,
        "run_id": f.run_id,
        "detail": f.detail,
    }


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}".replace(".0", "")
    return f"{seconds}s"
