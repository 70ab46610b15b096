"""The daily digest: once a day, each approver gets one message listing the Action items that
wait for them, with their age and a link; nobody gets one when nothing waits for them.

A skill says when (`digest: {at: "08:30", timezone: Europe/Amsterdam}`), or the server gives
one time for every skill that says nothing. `Digests.tick` is called by a loop (one leader
among the servers) with the injected clock: for each time that has passed today in its
timezone, it gathers the pending tool and budget items of those skills, finds who may decide
each one on each channel (`pizzabot.agent.policy.Access`: the skill's and the tool's approvers), and
hands each person their list through that channel's `DigestSender`. A delegate's list holds
the cards they decide for someone away (`pizzabot.agent.policy.away`), each marked "for alice".

Each (day, time, channel, person) is recorded by a unique row before it is sent (`OnceKeys`,
the table that marks mails handled), so a second server, a restart or a later tick the same
day sends nothing again; a failed send gives its key back, to be tried at the next tick.
Once a day's time has had its digests go out (from this process or another, none failing),
later ticks that day leave that time alone without reading the waiting items again: the
digest is that moment's list, and a card that comes later reaches its approvers on its own.
While nothing waits for anyone, each tick looks again, so a day's first card still brings
its digest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

from pizzabot.agent.context import Context
from pizzabot.agent.model import Box, Item, ItemStatus
from pizzabot.agent.policy import Access, Principal
from pizzabot.agent.policy.away import AwayAccess
from pizzabot.agent.policy.identity import identity_key
from pizzabot.agent.skills import DigestAt, Skill

__all__ = ["Digest", "DigestSender", "Digests", "OnceKeys", "age_text", "due_day"]

log = logging.getLogger(__name__)


class DigestSender(Protocol):
    """One channel's way to send a person their digest."""

    async def send_digest(self, address: str, digest: Digest) -> None: ...


class OnceKeys(Protocol):
    """Keys taken once (insert-or-nothing), and given back when the work failed."""

    async def record_once(self, key: str, *, kind: str, now: datetime) -> bool: ...

    async def release(self, key: str) -> None: ...


@dataclass(frozen=True)
class Digest:
    """What one person gets: the items waiting for them, oldest first, as of `now`."""

    channel: str
    address: str
    day: date
    now: datetime
    items: tuple[Item, ...]
    base_url: str = ""
    #: The items this person decides as an away person's delegate: item id → that person.
    delegated: Mapping[str, str] = field(default_factory=dict)

    def age(self, item: Item) -> str:
        return age_text(self.now - item.created_at)

    def for_whom(self, item: Item) -> str:
        """ "for alice" on an item the person decides as alice's delegate; else ""."""
        away = self.delegated.get(item.id)
        return f"for {away}" if away else ""

    def link(self, item: Item) -> str:
        return f"{self.base_url}/items/{item.id}" if self.base_url else f"item {item.id}"

    def lines(self) -> list[str]:
        """The digest in plain words, one line per item (each channel dresses it up)."""
        n = len(self.items)
        head = f"{n} decision{'s' if n != 1 else ''} wait{'s' if n == 1 else ''} for you:"
        return [head] + [
            f"- {i.title}{', ' if self.for_whom(i) else ''}{self.for_whom(i)} "
            f"(waiting {self.age(i)}): {self.link(i)}"
            for i in self.items
        ]


def age_text(age: timedelta) -> str:
    """ "2d 3h", "5h 10m", "12m": how long an item has waited, to the minute."""
    minutes = max(int(age.total_seconds() // 60), 0)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {mins}m"
    return f"{mins}m"


def due_day(now: datetime, when: DigestAt) -> date | None:
    """The local day whose digest is due at `now` (its time has passed today), else None."""
    local = now.astimezone(ZoneInfo(when.timezone))
    hour, minute = (int(p) for p in when.at.split(":"))
    return local.date() if local.time() >= time(hour, minute) else None


@dataclass
class Digests:
    """Sends the day's digests; `senders` by channel name ("slack", "email"); `default` the
    server's time for skills that set none (None: only skills that set one get digests)."""

    ctx: Context
    access: Access
    senders: Mapping[str, DigestSender]
    once_keys: OnceKeys
    default: DigestAt | None = None
    sent: list[Digest] = field(default_factory=list)
    #: The (day, time, timezone) whose digests have all gone out, from this process or another.
    finished: set[tuple[date, str, str]] = field(default_factory=set)

    async def tick(self) -> list[Digest]:
        """Send every digest that is due and was not sent yet; return those sent now."""
        now = self.ctx.clock()
        due: dict[tuple[date, DigestAt], set[str]] = {}
        for skill in self.ctx.skills.all():
            when = skill.digest or self.default
            day = due_day(now, when) if when is not None else None
            if when is not None and day is not None and _key(day, when) not in self.finished:
                due.setdefault((day, when), set()).add(skill.name)
        if not due:
            return []
        pending = await self.ctx.store.list_items(
            box=Box.ACTION, status=ItemStatus.PENDING, limit=10_000
        )
        if isinstance(self.access, AwayAccess):
            await self.access.refresh()
        done: list[Digest] = []
        for (day, when), skills in due.items():
            items = sorted(
                (i for i in pending if i.skill in skills), key=lambda i: (i.created_at, i.id)
            )
            marks: dict[tuple[str, str], dict[str, str]] = {}
            outcomes: set[str] = set()
            for (channel, address), theirs in self._by_person(items, marks).items():
                delegated = marks.get((channel, address), {})
                digest = Digest(
                    channel, address, day, now, tuple(theirs), self.ctx.base_url, delegated
                )
                outcome = await self._send(digest, when)
                if outcome == "sent":
                    done.append(digest)
                outcomes.add(outcome)
            if outcomes and "failed" not in outcomes:  # a failed send is tried at the next tick
                self.finished.add(_key(day, when))
        self.sent.extend(done)
        return done

    def _by_person(
        self, items: Iterable[Item], marks: dict[tuple[str, str], dict[str, str]]
    ) -> dict[tuple[str, str], list[Item]]:
        """Each person's items per channel: those the policy lets them decide there, and
        those they decide as an away person's delegate (`marks`: for whom)."""
        people: dict[tuple[str, str], list[Item]] = {}
        for item in items:
            if item.skill not in self.ctx.skills:
                continue
            skill = self.ctx.skills.get(item.skill)
            for channel in self.senders:
                for person in dict.fromkeys(skill.approvers_for(item.tool, channel)):
                    if self.access.may_decide(Principal.of(channel, person), item):
                        people.setdefault((channel, person), []).append(item)
                for address, away in self._delegates(skill, item, channel):
                    theirs = people.setdefault((channel, address), [])
                    if item not in theirs:
                        theirs.append(item)
                        marks.setdefault((channel, address), {})[item.id] = away
        return people

    def _delegates(self, skill: Skill, item: Item, channel: str) -> list[tuple[str, str]]:
        """The delegates who decide `item` for someone away, by their identity on `channel`,
        with the name of whom they stand in for."""
        if not isinstance(self.access, AwayAccess):
            return []
        out: list[tuple[str, str]] = []
        for name in dict.fromkeys(a.delegate for a in self.access.active()):
            delegate = skill.people.get(name)
            address = delegate.on(channel) if delegate is not None else None
            if address is None:
                continue
            away = self.access.stands_in_for(Principal.of(channel, address), item)
            if away is not None:
                out.append((address, away.person))
        return out

    async def _send(self, digest: Digest, when: DigestAt) -> Literal["sent", "had", "failed"]:
        who = identity_key(digest.channel, digest.address) or digest.address
        key = f"digest:{digest.day.isoformat()}:{when.at}:{when.timezone}:{digest.channel}:{who}"
        if not await self.once_keys.record_once(key, kind="digest", now=digest.now):
            return "had"  # sent already today (here, or by another server)
        try:
            await self.senders[digest.channel].send_digest(digest.address, digest)
        except Exception as exc:
            log.warning("digest for %s on %s not sent: %s", who, digest.channel, exc)
            await self.once_keys.release(key)
            return "failed"
        return "sent"


def _key(day: date, when: DigestAt) -> tuple[date, str, str]:
    return day, when.at, str(when.timezone)
