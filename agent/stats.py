"""Approval fatigue, measured: how many cards people get, how fast they decide, how often they
approve, and which calls they approve unchanged every time — each of those with the rule that
would stop asking.

A pure function of the period's action items (`compute`), so the API (`GET /api/stats`), the
web page's Stats and `pizzabot stats` show one set of figures. The items are read by a
`CardHistory` (`pizzabot.store.stats` implements it in SQL).

What counts:

- a **card** is an action item made in the period (`since` ≤ made < `until`), except a
  request's call that the rules or a grant decided when it came in (nobody saw a card);
  it counts on the UTC day it was made;
- a **decision by a person** is an approval, an edit or a rejection (not an expiry, nor a card
  closed because its run ended); the person is who decided (`decided_by`);
- **time to decide** runs from the card's making to its decision, over decisions by people;
  p50 and p90 are nearest-rank percentiles (the smallest time that at least half, or nine in
  ten, of the decisions took no longer than);
- the **approve rate** is approvals with the arguments unchanged over decisions by people;
- a **repeat** is a tool (or a tool with the same arguments) whose every decision by a person,
  at least `min_repeats` of them, approved the call unchanged, with the skill-file change
  that would stop asking (`pizzabot.agent.stats_rules`).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

from pydantic import BaseModel

from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus
from pizzabot.agent.stats_rules import Repeat, repeats

__all__ = [
    "CardHistory",
    "DayCount",
    "Outcomes",
    "PersonStats",
    "Repeat",
    "Stats",
    "ToolStats",
    "compute",
    "in_utc",
    "is_card",
    "nearest_rank",
    "period_start",
]

#: Who decides a card that no person decided: the clock (`timer`), its run's end (`engine`),
#: a request's rules or grant on arrival (`policy`, `grant`).
NOT_PEOPLE = frozenset({"timer", "engine", "policy", "grant"})
_BY_PEOPLE = frozenset({ItemStatus.APPROVED, ItemStatus.EDITED, ItemStatus.REJECTED})


_AGO = re.compile(r"^(\d{1,6})([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def period_start(text: str, *, now: datetime) -> datetime:
    """`30d`, `12h`, `2w` … before `now`, or an ISO date or time (UTC unless it says
    otherwise); ValueError for anything else."""
    text = text.strip()
    if m := _AGO.match(text):
        try:
            return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
        except OverflowError:
            raise ValueError(f"{text!r} reaches back before the calendar does") from None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text[:40]!r} is neither a duration (30d, 12h, 45m, 2w) nor an ISO date or time"
        ) from None
    return in_utc(at)


def in_utc(at: datetime) -> datetime:
    """`at` in UTC, as the database keeps times (a time without a zone is taken as UTC); a
    time its zone pushes past either end of the calendar is that end."""
    if at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    try:
        return at.astimezone(UTC)
    except OverflowError:
        end = datetime.min if at.year == datetime.min.year else datetime.max
        return end.replace(tzinfo=UTC)


class CardHistory(Protocol):
    """The action items made in a period, oldest first."""

    async def cards(self, *, since: datetime, until: datetime) -> list[Item]: ...


class DayCount(BaseModel):
    """Cards made on one UTC day (`day`: YYYY-MM-DD) for one person or tool (`by`), or for
    everyone (`by` empty)."""

    day: str
    by: str = ""
    cards: int


class Outcomes(BaseModel):
    """How the period's cards ended."""

    approved: int = 0
    edited: int = 0
    rejected: int = 0
    expired: int = 0
    cancelled: int = 0
    pending: int = 0
    #: Approvals unchanged over decisions by people; None without any.
    approve_rate: float | None = None
    #: Seconds from card to a person's decision (nearest-rank percentiles); None without any.
    p50_seconds: float | None = None
    p90_seconds: float | None = None


class PersonStats(Outcomes):
    person: str
    #: Cards this person decided.
    cards: int
    #: Days of the period with at least one of their decisions, and their busiest day's count.
    days: int
    busiest_day: int


class ToolStats(Outcomes):
    skill: str
    tool: str
    cards: int


class Stats(BaseModel):
    """The figures of one period."""

    since: datetime
    until: datetime
    cards: int
    outcomes: Outcomes
    per_day: list[DayCount]
    per_day_person: list[DayCount]
    per_day_tool: list[DayCount]
    people: list[PersonStats]
    tools: list[ToolStats]
    repeats: list[Repeat]
    min_repeats: int


def is_card(item: Item) -> bool:
    """An action item a person was shown (a request decided on arrival never was)."""
    return item.box is Box.ACTION and item.decided_via not in ("policy", "grant")


def by_person(item: Item) -> bool:
    """Decided by a person (not the clock, not its run's end)."""
    return item.status in _BY_PEOPLE and item.decided_via not in NOT_PEOPLE


def nearest_rank(values: Sequence[float], percent: float) -> float | None:
    """The smallest value that at least `percent` % of `values` are no greater than."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


def tool_of(item: Item) -> str:
    """The card's tool, or what it is about when it has none ("budget", "question")."""
    return item.tool or item.kind.value


def day_of(at: datetime) -> str:
    return at.date().isoformat()


def outcomes(items: Iterable[Item]) -> Outcomes:
    """The outcome counts, approve rate and decision times of `items`."""
    items = list(items)
    counts = Counter(i.status for i in items)
    people = [i for i in items if by_person(i)]
    waits = [(i.decided_at - i.created_at).total_seconds() for i in people if i.decided_at]
    approved = sum(1 for i in people if i.status is ItemStatus.APPROVED)
    return Outcomes(
        approved=counts[ItemStatus.APPROVED],
        edited=counts[ItemStatus.EDITED],
        rejected=counts[ItemStatus.REJECTED],
        expired=counts[ItemStatus.EXPIRED],
        cancelled=counts[ItemStatus.CANCELLED],
        pending=counts[ItemStatus.PENDING],
        approve_rate=round(approved / len(people), 4) if people else None,
        p50_seconds=nearest_rank(waits, 50),
        p90_seconds=nearest_rank(waits, 90),
    )


def _days(items: Iterable[Item], key: str = "") -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for i in items:
        by = "" if not key else (i.decided_by or "") if key == "person" else tool_of(i)
        found[(day_of(i.created_at), by)] += 1
    return found


def _listed(counts: Counter[tuple[str, str]]) -> list[DayCount]:
    return [DayCount(day=d, by=b, cards=n) for (d, b), n in sorted(counts.items())]


def _people(decided: list[Item]) -> list[PersonStats]:
    mine: dict[str, list[Item]] = defaultdict(list)
    for i in decided:
        mine[i.decided_by or ""].append(i)
    out: list[PersonStats] = []
    for person, items in mine.items():
        days = Counter(day_of(i.created_at) for i in items)
        out.append(
            PersonStats(
                person=person,
                cards=len(items),
                days=len(days),
                busiest_day=max(days.values()),
                **outcomes(items).model_dump(),
            )
        )
    return sorted(out, key=lambda p: (-p.cards, p.person))


def _tools(cards: list[Item]) -> list[ToolStats]:
    mine: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for i in cards:
        mine[(i.skill, tool_of(i))].append(i)
    out = [
        ToolStats(skill=s, tool=t, cards=len(items), **outcomes(items).model_dump())
        for (s, t), items in mine.items()
    ]
    return sorted(out, key=lambda t: (-t.cards, t.skill, t.tool))


def compute(
    items: Iterable[Item], *, since: datetime, until: datetime, min_repeats: int = 3
) -> Stats:
    """The figures of the cards among `items` made in [`since`, `until`)."""
    cards = sorted(
        (i for i in items if is_card(i) and since <= i.created_at < until),
        key=lambda i: (i.created_at, i.id),
    )
    decided = [i for i in cards if by_person(i)]
    return Stats(
        since=since,
        until=until,
        cards=len(cards),
        outcomes=outcomes(cards),
        per_day=_listed(_days(cards)),
        per_day_person=_listed(_days(decided, "person")),
        per_day_tool=_listed(_days(cards, "tool")),
        people=_people(decided),
        tools=_tools(cards),
        repeats=repeats([i for i in decided if i.kind is ItemKind.TOOL], min_repeats),
        min_repeats=min_repeats,
    )
