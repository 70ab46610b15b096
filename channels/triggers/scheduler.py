"""Schedules: cron or interval fires that start runs, each fire at most once.

APScheduler (an `AsyncIOScheduler` with an in-memory job store rebuilt from the database)
decides *when* a schedule is due; the database decides *whether* the fire happens. A fire is
named by its scheduled time, never by the clock that noticed it, and the row (schedule, fire
time) is unique: a restart, a clock jump or a second server on the same PostgreSQL inserts
nothing the second time. A fire only inserts a run (`Runs.start`); workers do the rest.
APScheduler does not tell a job's function the time it was due, so a fire starts from the
scheduler's `EVENT_JOB_SUBMITTED` event, which carries that time (public API only).

    record the fire once ──duplicate──> nothing
          │ claimed
    Runs.start(idempotency_key="schedule:<id>:<fire time>") ─> fire row gets the run id

A crash between the two steps leaves a "claimed" row; `recover` finishes it later, and the
idempotency key makes that safe even if the run had already been inserted.

Misfires — fire times that passed while no server ran, or a process stalled longer than the
grace period — follow the schedule's policy: `skip`, or `run_once` (one run for the latest
missed time, however many were missed). Paused time is not missed time.

Fire times are computed in `pizzabot.bot.schedule_times`; what the API shows is shaped in
`pizzabot.bot.schedule_json`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from apscheduler.events import EVENT_JOB_SUBMITTED, JobSubmissionEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger

from pizzabot.agent.context import new_id, utcnow
from pizzabot.agent.errors import Conflict, InvalidArguments, KillSwitchOn, NotFound
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.runs import Runs
from pizzabot.agent.schedules import ScheduleRecord, ScheduleStore
from pizzabot.agent.skills import Schedule, SkillBook
from pizzabot.agent.store import AuditTrail
from pizzabot.channels.triggers.schedule_json import schedule_detail_json, schedules_json
from pizzabot.channels.triggers.schedule_times import EPOCH, build_trigger, fire_key, latest_fire

log = logging.getLogger(__name__)

FireStatus = Literal["started", "duplicate", "skipped", "refused", "failed", "paused", "missing"]


@dataclass(frozen=True)
class FireResult:
    schedule_id: str
    fire_time: datetime
    status: FireStatus
    run_id: str | None = None
    detail: str | None = None


def skill_schedule_id(skill: str, spec: Schedule) -> str:
    """A skill schedule's id is a digest of its definition: unchanged → same row (and pause)."""
    text = json.dumps([skill, spec.model_dump()], sort_keys=True)
    return f"{skill[:40]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def record_trigger(rec: ScheduleRecord) -> BaseTrigger:
    return build_trigger(rec.cron, rec.every_seconds, rec.timezone)


async def _on_time() -> None:
    """The job function APScheduler requires; the fire starts from the submission event."""


# -- the scheduler -------------------------------------------------------------------------


class Scheduler:
    def __init__(
        self,
        *,
        runs: Runs,
        triggers: ScheduleStore,
        audit: AuditTrail,
        skills: SkillBook,
        clock: Callable[[], datetime] = utcnow,
        grace_seconds: float = 60.0,
        sync_interval: float = 30.0,
    ) -> None:
        self.runs = runs
        self.triggers = triggers
        self.trail = audit
        self.skills = skills
        self.clock = clock
        self.grace = timedelta(seconds=grace_seconds)
        self.sync_interval = sync_interval
        #: Skill schedules that could not be loaded, by skill: shown in the API.
        self.errors: list[dict[str, str]] = []
        self._aps: AsyncIOScheduler | None = None
        self._firing: set[asyncio.Task[None]] = set()

    # -- firing --------------------------------------------------------------------------

    async def fire(
        self, schedule_id: str, fire_time: datetime, *, detail: str | None = None
    ) -> FireResult:
        """Start the run of one fire, unless that fire happened already (here or elsewhere)."""
        t = fire_key(fire_time)
        outcome = await self.triggers.fire_once(schedule_id, t, now=self.clock(), detail=detail)
        if outcome != "claimed":
            return FireResult(schedule_id, t, outcome)
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
                by=Principal.system("schedule", f"schedule:{schedule_id}"),
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
        outcome = await self.triggers.fire_once(
            schedule_id, t, now=now, status="skipped", detail=detail
        )
        if outcome == "claimed":
            log.info("schedule %s: skipped the fire of %s (%s)", schedule_id, t, detail)
            return FireResult(schedule_id, t, "skipped", detail=detail)
        return FireResult(schedule_id, t, outcome)

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
        """Finish fires whose process died after recording them (the run key makes it safe)."""
        before = self.clock() - timedelta(seconds=older_than)
        return [
            await self._start(f.schedule_id, f.fire_time)
            for f in await self.triggers.unfinished_fires(before=before)
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
        """One APScheduler job per active schedule row."""
        aps = self._aps
        if aps is None:
            return
        active: dict[str, ScheduleRecord] = {
            r.id: r for r in await self.triggers.list_schedules() if not r.paused
        }
        jobs = {job.id for job in aps.get_jobs()}
        for job_id in jobs - set(active):
            with contextlib.suppress(JobLookupError):
                aps.remove_job(job_id)
        for sid in set(active) - jobs:
            try:
                trigger = record_trigger(active[sid])
            except ValueError as exc:
                log.error("schedule %s: %s", sid, exc)
                continue
            aps.add_job(
                _on_time,
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
        aps = AsyncIOScheduler(timezone=UTC)
        aps.add_listener(self._submitted, EVENT_JOB_SUBMITTED)
        aps.start()
        self._aps = aps
        await self._reconcile()

    def _submitted(self, event: JobSubmissionEvent) -> None:
        """APScheduler found a job due: fire it for each time it was due (one when coalesced)."""
        task = asyncio.get_running_loop().create_task(
            self._fire_times(event.job_id, list(event.scheduled_run_times)),
            name=f"schedule:{event.job_id}",
        )
        self._firing.add(task)
        task.add_done_callback(self._firing.discard)

    async def _fire_times(self, schedule_id: str, times: list[datetime]) -> None:
        try:
            for t in times:
                await self.due(schedule_id, t)
        except Exception:
            log.exception("schedule %s: fire failed", schedule_id)

    async def run_forever(self) -> None:
        """Pick up schedules added, paused or removed by other servers, and fires never started."""
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
        for task in list(self._firing):
            task.cancel()

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
        await self.trail.audit(
            action=action,
            actor=actor,
            channel="api",
            now=self.clock(),
            detail={"schedule": schedule_id, **detail},
        )

    # -- what the API shows --------------------------------------------------------------

    async def list_json(self) -> dict[str, Any]:
        return await schedules_json(self.triggers, errors=self.errors, now=self.clock())

    async def get_json(self, schedule_id: str) -> dict[str, Any]:
        return await schedule_detail_json(self.triggers, schedule_id, now=self.clock())


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}".replace(".0", "")
    return f"{seconds}s"
