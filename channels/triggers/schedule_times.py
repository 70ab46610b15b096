"""When a schedule fires: APScheduler's triggers, and the arithmetic the scheduler does on them.

Only the triggers' public API is used: `CronTrigger.from_crontab`, `IntervalTrigger` and
`get_next_fire_time(previous, now)`. Two things are Pizza Bot's own:

- crontab weekdays. APScheduler 3 reads a weekday number with 0 as Monday, where cron means
  Sunday (a documented mismatch, "cannot be changed in the 3.x series"): "1-5" would fire
  Tuesday to Saturday. `cron_weekdays` rewrites the field as day names, which both agree on.
- `every:` intervals count from 1970-01-01 00:00 UTC (so `every: 30m` fires at :00 and :30),
  which lets every server compute the same fire times without agreeing on a start.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


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
        return _cron_trigger(cron, tz)
    assert every is not None
    if every < 1 or every != int(every):
        raise ValueError("every must be a whole number of seconds, at least 1s")
    return IntervalTrigger(seconds=int(every), start_date=EPOCH, timezone=UTC)


def _cron_trigger(cron: str, tz: ZoneInfo) -> CronTrigger:
    try:
        fields = cron.split()
        if len(fields) != 5:
            raise ValueError(f"{len(fields)} fields instead of 5")
        fields[4] = cron_weekdays(fields[4])
        return CronTrigger.from_crontab(" ".join(fields), timezone=tz)
    except ValueError as exc:
        raise ValueError(
            f"cron {cron!r}: {exc} (five fields: min hour day month weekday)"
        ) from None


def _day_number(token: str) -> int:
    token = token.strip().lower()
    if token in _DAYS:
        return _DAYS.index(token)
    if token.isdigit() and int(token) <= 7:
        return int(token) % 7
    raise ValueError(f"weekday {token!r}: use 0-7 (0 and 7 are Sunday) or sun..sat")


def _days_of(part: str) -> range:
    """The cron day numbers (0 = Sunday, 7 kept as a second Sunday) one list item spans."""
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
    return range(first, last + 1, step or 1)


def cron_weekdays(field: str) -> str:
    """A crontab weekday field (0 or 7 = Sunday; names; lists, ranges, steps) as day names."""
    if field.strip() == "*":
        return "*"
    days = {d % 7 for part in field.split(",") for d in _days_of(part)}
    return ",".join(_DAYS[d] for d in sorted(days))


def fire_key(t: datetime) -> datetime:
    """A fire time as stored: UTC, whole seconds, so every server names a fire the same way."""
    return t.astimezone(UTC).replace(microsecond=0)


def next_fires(trigger: BaseTrigger, now: datetime, count: int = 3) -> list[datetime]:
    """The next `count` fire times after `now`."""
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
