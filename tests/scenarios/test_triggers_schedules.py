"""Schedules, driven with a clock the test moves: `Scheduler.fire` / `due` / `catch_up` are
called directly, the way a due APScheduler job leads to them; one test lets APScheduler really
fire a schedule.

A fire is unique per (schedule, fire time) in the database, so a second call, a restarted
scheduler or a second server on the same PostgreSQL starts nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pizzabot.agent.context import utcnow
from pizzabot.agent.errors import Conflict, InvalidArguments
from pizzabot.agent.policy import Principal
from pizzabot.agent.skills import Schedule, Skill, SkillBook
from pizzabot.bot.core import build
from pizzabot.channels.triggers.schedule_times import build_trigger, latest_fire, next_fires
from pizzabot.channels.triggers.scheduler import Scheduler
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.triggers import TriggerStore
from tests.peers.triggers import FakeClock
from tests.waiting import eventually

MONDAY_7_AMS = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)  # Monday 07:00 in Amsterdam
MORNING = {"cron": "0 8 * * 1-5", "input": "morning report", "timezone": "Europe/Amsterdam"}


def skill(*schedules: dict[str, Any], name: str = "test") -> Skill:
    return Skill.model_validate(
        {
            "name": name,
            "instructions": "x",
            "model": "openai/scripted",
            "schedules": list(schedules),
        }
    )


class Server:
    """One server's scheduling parts on a shared database: its own engine, store and clock."""

    def __init__(self, url: str, clock: Callable[[], datetime], skills: SkillBook) -> None:
        self.url, self.clock, self.skills = url, clock, skills

    async def __aenter__(self) -> Server:
        engine = connect(self.url)
        await upgrade(engine)
        self.store = SqlStore(engine)
        core = build(store=self.store, skills=self.skills, channels={}, mind=None, clock=self.clock)
        self.ctx, self.runs = core.ctx, core.runs
        self.sched = Scheduler(
            runs=self.runs,
            triggers=TriggerStore(self.store),
            audit=self.store,
            skills=self.skills,
            clock=self.clock,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.sched.stop()
        await self.store.aclose()

    def restart(self) -> Scheduler:
        """A new scheduler on the same database, as after a restart (nothing kept in memory)."""
        return Scheduler(
            runs=self.runs,
            triggers=TriggerStore(self.store),
            audit=self.store,
            skills=self.skills,
            clock=self.clock,
        )

    async def only_schedule(self) -> str:
        [rec] = await self.sched.triggers.list_schedules()
        return rec.id


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(MONDAY_7_AMS)


@pytest.fixture
async def server(db_url: str, clock: FakeClock) -> AsyncIterator[Server]:
    async with Server(db_url, clock, SkillBook({"test": skill(MORNING)})) as srv:
        await srv.sched.sync()
        yield srv


# -- fire times ------------------------------------------------------------------------------


def test_crontab_weekdays_mean_what_cron_means() -> None:
    trigger = build_trigger("0 8 * * 1-5", None, "Europe/Amsterdam")
    friday = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    nxt = next_fires(trigger, friday, 2)
    assert [t.isoformat() for t in nxt] == [
        "2026-11-30T08:00:00+01:00",
        "2026-12-01T08:00:00+01:00",
    ]
    sunday = build_trigger("30 9 * * 0", None, "UTC")
    assert next_fires(sunday, friday, 1)[0].strftime("%A %H:%M") == "Sunday 09:30"


WEEK = [datetime(2026, 11, 29, 12, 0, tzinfo=UTC) + timedelta(days=d) for d in range(7)]


@pytest.mark.parametrize(
    ("weekdays", "fires_on"),
    [
        ("1-5", "Mon Tue Wed Thu Fri"),
        ("0", "Sun"),
        ("7", "Sun"),
        ("0,7", "Sun"),
        ("5-7", "Sun Fri Sat"),
        ("*/2", "Sun Tue Thu Sat"),
        ("1-5/2", "Mon Wed Fri"),
        ("sat,sun", "Sun Sat"),
        ("mon-fri", "Mon Tue Wed Thu Fri"),
        ("*", "Sun Mon Tue Wed Thu Fri Sat"),
    ],
)
def test_every_crontab_weekday_form_fires_on_the_days_cron_means(
    weekdays: str, fires_on: str
) -> None:
    """0 and 7 are Sunday, as in crontab(5); APScheduler 3 alone would read 0 as Monday."""
    trigger = build_trigger(f"0 13 * * {weekdays}", None, "UTC")
    fires = next_fires(trigger, WEEK[0], 7)
    assert " ".join(t.strftime("%a") for t in fires if t < WEEK[-1] + timedelta(days=1)) == (
        fires_on
    )


class CountingTrigger:
    """A trigger that counts how often it is asked for a fire time."""

    def __init__(self, trigger: Any) -> None:
        self.trigger, self.asked = trigger, 0

    def get_next_fire_time(self, previous: datetime | None, now: datetime) -> datetime | None:
        self.asked += 1
        return self.trigger.get_next_fire_time(previous, now)  # type: ignore[no-any-return]


def test_latest_missed_fire_is_found_without_walking_every_fire() -> None:
    minutely = CountingTrigger(build_trigger("* * * * *", None, "UTC"))
    now = datetime(2026, 11, 30, 6, 0, 30, tzinfo=UTC)
    t = latest_fire(minutely, datetime(2024, 1, 1, tzinfo=UTC), now)  # type: ignore[arg-type]
    assert t == datetime(2026, 11, 30, 6, 0, tzinfo=UTC)
    assert minutely.asked < 10  # a handful of steps, not one per missed minute (~1.5 million)
    weekdays = build_trigger(MORNING["cron"], None, MORNING["timezone"])
    friday_fire = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)
    assert latest_fire(weekdays, friday_fire, MONDAY_7_AMS) is None  # nothing over the weekend
    assert latest_fire(weekdays, friday_fire - timedelta(seconds=1), MONDAY_7_AMS) == friday_fire


def test_intervals_are_aligned_so_every_server_agrees() -> None:
    half_hour = build_trigger(None, 1800, "UTC")
    now = datetime(2026, 11, 30, 6, 7, 13, 5, tzinfo=UTC)
    assert [t.strftime("%H:%M:%S") for t in next_fires(half_hour, now, 3)] == [
        "06:30:00",
        "07:00:00",
        "07:30:00",
    ]


@pytest.mark.parametrize(
    ("cron", "every", "tz", "problem"),
    [
        ("0 8 * *", None, "UTC", "4 fields"),
        ("0 25 * * *", None, "UTC", "cron"),
        ("0 8 * * 9", None, "UTC", "weekday"),
        ("0 8 * * *", None, "Mars/Olympus", "unknown timezone"),
        (None, None, "UTC", "exactly one"),
        ("0 8 * * *", 60.0, "UTC", "exactly one"),
        (None, 0.5, "UTC", "at least 1s"),
    ],
)
def test_bad_schedules_are_refused_with_the_reason(
    cron: str | None, every: float | None, tz: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        build_trigger(cron, every, tz)


# -- firing ----------------------------------------------------------------------------------


async def test_a_cron_fire_creates_exactly_one_run(server: Server, clock: FakeClock) -> None:
    sid = await server.only_schedule()
    listed = (await server.sched.list_json())["items"][0]
    assert listed["next_fire_times"][0] == "2026-11-30T08:00:00+01:00"
    assert listed["source"] == "skill" and listed["last_fire"] is None

    fire_time = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
    clock.set(fire_time + timedelta(seconds=2))
    first = await server.sched.due(sid, fire_time)
    assert first.status == "started" and first.run_id
    # Again, through either door, and from a restarted scheduler: nothing more.
    assert (await server.sched.due(sid, fire_time)).status == "duplicate"
    assert (await server.sched.fire(sid, fire_time + timedelta(microseconds=300))).status == (
        "duplicate"
    )
    assert (await server.restart().fire(sid, fire_time)).status == "duplicate"

    runs = await server.store.list_runs()
    assert [(r.id, r.trigger, r.input, r.skill) for r in runs] == [
        (first.run_id, f"schedule:{sid}", "morning report", "test")
    ]
    last = (await server.sched.list_json())["items"][0]["last_fire"]
    assert last == {
        "fire_time": "2026-11-30T07:00:00+00:00",
        "status": "started",
        "run_id": first.run_id,
        "detail": None,
    }


async def test_two_schedulers_on_one_postgres_fire_once_between_them(
    pg_url: str, clock: FakeClock
) -> None:
    every_ten = {"cron": "*/10 * * * *", "input": "tick", "misfire": "run_once"}
    skills = SkillBook({"test": skill(every_ten)})
    async with Server(pg_url, clock, skills) as a, Server(pg_url, clock, skills) as b:
        await asyncio.gather(a.sched.sync(), b.sched.sync())
        sid = await a.only_schedule()
        assert sid == await b.only_schedule()
        started: list[str] = []
        for k in range(6):
            t = MONDAY_7_AMS + timedelta(minutes=10 * k)
            clock.set(t + timedelta(seconds=1))
            results = await asyncio.gather(*(s.sched.due(sid, t) for s in (a, b, a, b)))
            assert sorted(r.status for r in results) == ["duplicate"] * 3 + ["started"]
            started += [r.run_id for r in results if r.run_id]
        # Both come back from downtime at once (07:25): the missed 07:20 fire runs once. The
        # one that looks after the other has recorded it finds nothing missed, or a duplicate.
        clock.advance(minutes=35)
        ups = await asyncio.gather(a.restart().catch_up(), b.restart().catch_up())
        statuses = sorted(r.status for r in ups[0] + ups[1])
        assert statuses in (["duplicate", "started"], ["started"])
        runs = await a.store.list_runs()
        assert len(runs) == 7 and len({r.id for r in runs}) == 7


@pytest.mark.parametrize("policy", ["skip", "run_once"])
async def test_a_misfire_after_downtime_follows_its_policy(
    sqlite_url: str, clock: FakeClock, policy: str
) -> None:
    hourly = {"every": "1h", "input": "hourly", "misfire": policy}
    clock.set(datetime(2026, 11, 30, 9, 0, 5, tzinfo=UTC))
    async with Server(sqlite_url, clock, SkillBook({"test": skill(hourly)})) as srv:
        await srv.sched.sync()
        sid = await srv.only_schedule()
        clock.set(datetime(2026, 11, 30, 10, 0, 1, tzinfo=UTC))
        assert (await srv.sched.due(sid, datetime(2026, 11, 30, 10, 0, tzinfo=UTC))).status == (
            "started"
        )

        # Down from 10:30 to 13:30: the 11:00, 12:00 and 13:00 fires were missed.
        clock.set(datetime(2026, 11, 30, 13, 30, tzinfo=UTC))
        [result] = await srv.restart().catch_up()
        assert result.fire_time == datetime(2026, 11, 30, 13, 0, tzinfo=UTC)
        runs = await srv.store.list_runs()
        if policy == "run_once":
            assert result.status == "started" and len(runs) == 2
            assert result.detail == "missed by 30m; misfire policy: run_once"
        else:
            assert result.status == "skipped" and len(runs) == 1
        fires = (await srv.sched.get_json(sid))["fires"]
        assert [(f["fire_time"][11:16], f["status"]) for f in fires] == [
            ("13:00", "started" if policy == "run_once" else "skipped"),
            ("10:00", "started"),
        ]
        # A second restart finds nothing more to catch up.
        assert await srv.restart().catch_up() == []
        described = await srv.sched.get_json(sid)
        assert described["next_fire_times"][0] == "2026-11-30T14:00:00+00:00"

        # Back within the grace period, a fire is simply late, whatever the policy.
        clock.set(datetime(2026, 11, 30, 14, 0, 40, tzinfo=UTC))
        [late] = await srv.restart().catch_up()
        assert late.status == "started" and late.detail is None


async def test_pause_and_resume(server: Server, clock: FakeClock) -> None:
    sid = await server.only_schedule()
    await server.sched.set_paused(sid, paused=True)
    shown = await server.sched.get_json(sid)
    assert shown["paused"] is True and shown["next_fire_times"] == []

    monday_fire = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
    clock.set(monday_fire + timedelta(seconds=1))
    assert (await server.sched.due(sid, monday_fire)).status == "paused"
    assert (await server.sched.fire(sid, monday_fire)).status == "paused"
    clock.set(datetime(2026, 12, 2, 12, 0, tzinfo=UTC))  # Wednesday noon
    assert await server.restart().catch_up() == []  # paused schedules do not catch up

    await server.sched.set_paused(sid, paused=False)
    # The fires that passed while paused were not missed: nothing runs on resume or restart.
    assert await server.restart().catch_up() == []
    assert await server.store.list_runs() == []
    shown = await server.sched.get_json(sid)
    assert shown["next_fire_times"][0] == "2026-12-03T08:00:00+01:00"
    thursday = datetime(2026, 12, 3, 7, 0, tzinfo=UTC)
    clock.set(thursday)
    assert (await server.sched.due(sid, thursday)).status == "started"
    actions = [e.action for e in await server.store.audit_log()]
    assert actions[:2] == ["schedule_resumed", "schedule_paused"]


async def test_the_kill_switch_refuses_a_fire(server: Server, clock: FakeClock) -> None:
    sid = await server.only_schedule()
    await server.runs.kill(by=Principal.owner("api"))
    t = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
    clock.set(t)
    result = await server.sched.due(sid, t)
    assert result.status == "refused" and "kill switch" in (result.detail or "")
    assert await server.store.list_runs() == []
    await server.runs.lift_kill(by=Principal.owner("api"))
    assert (await server.sched.due(sid, t)).status == "duplicate"  # that fire is spent
    nxt = t + timedelta(days=1)
    clock.set(nxt)
    assert (await server.sched.due(sid, nxt)).status == "started"


async def test_a_fire_claimed_by_a_process_that_died_is_finished_once(
    server: Server, clock: FakeClock
) -> None:
    sid = await server.only_schedule()
    triggers = server.sched.triggers
    t1 = datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
    t2 = t1 + timedelta(days=1)
    # Died after claiming the fire of t1.
    clock.set(t1)
    assert await triggers.fire_once(sid, t1, now=clock()) == "claimed"
    clock.advance(seconds=30)
    assert await server.sched.recover() == []  # too fresh: it may still be starting
    clock.advance(minutes=2)
    [one] = await server.restart().recover()
    assert (one.fire_time, one.status) == (t1, "started")
    # Died after claiming the fire of t2 *and* inserting its run.
    clock.set(t2)
    assert await triggers.fire_once(sid, t2, now=clock()) == "claimed"
    orphan = await server.runs.start(
        "test",
        "morning report",
        trigger=f"schedule:{sid}",
        idempotency_key=f"schedule:{sid}:{t2.isoformat()}",
        by=Principal.owner("api"),
    )
    clock.advance(minutes=2)
    [two] = await server.restart().recover()
    assert (two.fire_time, two.status, two.run_id) == (t2, "started", orphan.id)
    assert len(await server.store.list_runs()) == 2
    assert await server.sched.recover() == []


async def test_skill_schedules_follow_the_skill_files(server: Server, clock: FakeClock) -> None:
    sid = await server.only_schedule()
    await server.sched.set_paused(sid, paused=True)
    await server.sched.sync()
    assert (await server.sched.get_json(sid))["paused"] is True  # unchanged schedule, same row
    with pytest.raises(Conflict, match="remove it there"):
        await server.sched.remove(sid)

    hourly = {"every": "1h", "input": "hourly"}
    bad = {"cron": "0 8 * * 8", "input": "never"}
    server.skills.replace({"test": skill(hourly, bad)})
    await server.sched.sync()
    listed = await server.sched.list_json()
    assert [(s["every_seconds"], s["input"]) for s in listed["items"]] == [(3600.0, "hourly")]
    assert len(listed["errors"]) == 1 and listed["errors"][0]["skill"] == "test"
    assert "weekday '8'" in listed["errors"][0]["message"]


async def test_api_schedules_are_added_checked_and_removed(
    server: Server, clock: FakeClock
) -> None:
    clock.advance(seconds=1)
    with pytest.raises(InvalidArguments):
        await server.sched.add("test", Schedule(cron="0 8 * *"))
    rec = await server.sched.add("test", Schedule(every=900, input="quarterly", misfire="run_once"))
    shown = await server.sched.get_json(rec.id)
    assert shown["source"] == "api" and shown["misfire"] == "run_once"
    assert shown["next_fire_times"][:2] == [
        "2026-11-30T06:15:00+00:00",
        "2026-11-30T06:30:00+00:00",
    ]
    await server.sched.remove(rec.id)
    assert len((await server.sched.list_json())["items"]) == 1


async def test_apscheduler_really_calls_fire(sqlite_url: str) -> None:
    async with Server(sqlite_url, utcnow, SkillBook({"test": skill()})) as srv:
        await srv.sched.start()
        rec = await srv.sched.add("test", Schedule(every=1, input="each second"))

        async def started() -> list[Any]:
            return [f for f in await srv.sched.triggers.fires(rec.id) if f.status == "started"]

        fires = await eventually(started, what=f"APScheduler to fire schedule {rec.id}")
        await srv.sched.stop()
        fire = fires[-1]
        assert fire.fire_time.microsecond == 0
        run = await srv.store.get_run(fire.run_id or "")
        assert run.trigger == f"schedule:{rec.id}" and run.input == "each second"
        all_fires = await srv.sched.triggers.fires(rec.id)
        assert len({f.fire_time for f in all_fires}) == len(all_fires)
        assert len(await srv.store.list_runs()) <= len(all_fires)
