"""Who is on call: a weekly rota, or the shifts of an iCalendar file.

A rota hands over once a week, at a weekday and time in its timezone: the first person takes
over at the first hand-over on or after `starts`, the next a week later, and so on round the
list (before `starts`, the turns run backwards the same way, so someone is always on call).
Hand-overs are computed in the rota's timezone, so a shift around a daylight-saving change
is an hour longer or shorter, and the hand-over stays at its local time.

A calendar's shifts are its events (repeating ones expanded by `recurring_ical_events`): an
event's SUMMARY is the name of the person on call (from `people:`), or an ATTENDEE's
address is theirs. Overlapping shifts put both people on call; a moment no shift covers has
nobody on call, and then nobody of that group may decide (lists fail closed). The file is
read, and every event checked, when the skills load (`load_calendar`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import PrivateAttr, field_validator

from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.people import Person
from pizzabot.agent.skills.triggers import TimeZone

if TYPE_CHECKING:  # loaded with the first calendar: a server without one never needs them
    import icalendar

__all__ = ["MAX_CALENDAR_BYTES", "Handover", "OnCall", "Shifts", "WeeklyRota", "load_calendar"]

#: A shift calendar larger than this is refused: it is read at every load of the skills.
MAX_CALENDAR_BYTES = 1_000_000

_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEK = dt.timedelta(days=7)


@dataclass(frozen=True)
class OnCall:
    """Who is on call (`people`: names from `people:`) and the shift's bounds."""

    people: tuple[str, ...]
    since: dt.datetime | None
    until: dt.datetime | None


class Handover(Strict):
    weekday: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    at: dt.time

    @field_validator("at", mode="before")
    @classmethod
    def _clock_time(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool):
            # YAML reads an unquoted 10:30 as the number 630 (base 60).
            raise ValueError('write the hand-over time in quotes, like "09:00"')
        return v


class WeeklyRota(Strict):
    """People take turns a week each, handing over at `handover` in `timezone`."""

    people: list[str]
    handover: Handover
    timezone: TimeZone = "UTC"
    starts: dt.date

    @field_validator("people")
    @classmethod
    def _someone(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("a rota needs at least one person")
        return v

    def _handover(self, k: int) -> dt.datetime:
        """The k-th hand-over (0: the first on or after `starts`), in UTC."""
        wanted = _WEEKDAYS.index(self.handover.weekday)
        first = self.starts + dt.timedelta(days=(wanted - self.starts.weekday()) % 7)
        local = dt.datetime.combine(first + k * _WEEK, self.handover.at, ZoneInfo(self.timezone))
        return local.astimezone(dt.UTC)

    def on_call(self, at: dt.datetime) -> OnCall:
        k = (at - self._handover(0)) // _WEEK
        while self._handover(k + 1) <= at:
            k += 1
        while self._handover(k) > at:
            k -= 1
        person = self.people[k % len(self.people)]
        return OnCall((person,), self._handover(k), self._handover(k + 1))


class Shifts(Strict):
    """Shifts from an iCalendar file (`file`, relative to the skills folder)."""

    file: str
    _calendar: icalendar.Calendar | None = PrivateAttr(default=None)
    _emails: dict[str, str] = PrivateAttr(default_factory=dict)
    _names: tuple[str, ...] = PrivateAttr(default=())

    def named(self) -> list[str]:
        return list(self._names)

    def on_call(self, at: dt.datetime) -> OnCall:
        if self._calendar is None:
            return OnCall((), None, None)
        import recurring_ical_events

        events = recurring_ical_events.of(self._calendar).between(at, at + dt.timedelta(seconds=1))
        people: dict[str, None] = {}
        starts: list[dt.datetime] = []
        ends: list[dt.datetime] = []
        for event in events:
            name = _who(event, set(self._names), self._emails)
            if name is not None:
                people[name] = None
                starts.append(_utc(event.get("DTSTART").dt))
                if event.get("DTEND") is not None:
                    ends.append(_utc(event.get("DTEND").dt))
        return OnCall(tuple(people), max(starts, default=None), min(ends, default=None))


def _utc(value: dt.date | dt.datetime) -> dt.datetime:
    """A calendar time in UTC: a floating time or an all-day date is read as UTC."""
    if not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time(), dt.UTC)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _who(event: Any, names: set[str], emails: Mapping[str, str]) -> str | None:
    summary = str(event.get("SUMMARY") or "").strip()
    if summary in names:
        return summary
    attendees = event.get("ATTENDEE")
    for attendee in attendees if isinstance(attendees, list) else [attendees]:
        address = str(attendee or "").removeprefix("mailto:").removeprefix("MAILTO:").lower()
        if address in emails:
            return emails[address]
    return None


def load_calendar(shifts: Shifts, folder: Path, people: Mapping[str, Person]) -> None:
    """Read `shifts.file` and check that every event names a person; raise ValueError with
    what is wrong."""
    import icalendar

    path = (folder / shifts.file).resolve()
    if folder.resolve() not in path.parents:
        raise ValueError(f"shifts file {shifts.file!r} must be inside the skills folder")
    try:
        with path.open("rb") as file:  # never more than the limit in memory
            raw = file.read(MAX_CALENDAR_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read shifts file {shifts.file!r}: {exc.strerror}") from None
    if len(raw) > MAX_CALENDAR_BYTES:
        raise ValueError(f"shifts file {shifts.file!r} is over {MAX_CALENDAR_BYTES} bytes")
    try:
        calendar = icalendar.Calendar.from_ical(raw)
    except ValueError as exc:
        raise ValueError(f"shifts file {shifts.file!r} is not an iCalendar file: {exc}") from None
    emails = {p.email: name for name, p in people.items() if p.email}
    names: dict[str, None] = {}
    for event in calendar.walk("VEVENT"):
        name = _who(event, set(people), emails)
        if name is None:
            said = str(event.get("SUMMARY") or "").strip() or "(no summary)"
            raise ValueError(
                f"shifts file {shifts.file!r}: the shift {said!r} names no person in people "
                "(its SUMMARY is a person's name, or an ATTENDEE has their email)"
            )
        names[name] = None
    shifts._calendar, shifts._emails, shifts._names = calendar, emails, tuple(names)
