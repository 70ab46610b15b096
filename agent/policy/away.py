"""Away and delegation: a person who is away has a delegate, who decides in their place.

A person of the skills' `people:` may say they are away until a time, naming another person
as their delegate (`pizzabot away --until … --delegate bob`, the web page, `POST
/api/away`). Until then:

- the cards that would reach the away person go to the delegate (`pizzabot.agent.away_cards`),
  marked "for alice, who is away until …" on every channel;
- the delegate may decide what the away person may decide, and nothing more: the question
  is asked as the away person (`Access.may_decide` for a `decide` principal naming them). The
  decision is recorded as "bob for alice" (`Principal.on_behalf`);
- the delegate stays the human they are: their own request is theirs to not approve
  (`self_approval`), the away person's request is not theirs to approve either where the away
  person could not, and a count of people (`approvals.required`) counts the delegate as
  themselves, so one human never counts twice through a delegation.

Away ends by itself at `until`, or when the person says they are back. The state is kept in
the database (`AwayBook`, `pizzabot.store.away`) so that every server and worker sees it;
each keeps a snapshot (`AwayAccess`) that is read again whenever a card is made or a decision
is taken, so the synchronous checks a channel makes before it shows a button agree with the
decision that follows.

Names are the names of `people:`: alice in one skill is alice in another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from pizzabot.agent.errors import AlreadyApproved
from pizzabot.agent.model import Item
from pizzabot.agent.policy.access import Access, Act, Verdict
from pizzabot.agent.policy.principal import Principal, Scope
from pizzabot.agent.policy.quorum import person_of
from pizzabot.agent.skills import Skill, SkillBook

__all__ = [
    "Away",
    "AwayAccess",
    "AwayBook",
    "acting_for",
    "counted_already",
    "known_people",
    "may_delegate",
    "refreshed",
    "until_text",
]


@dataclass(frozen=True)
class Away:
    """`person` is away until `until`, and `delegate` decides for them; set by `set_by`."""

    person: str
    delegate: str
    until: datetime
    set_by: str
    set_at: datetime

    def holds(self, now: datetime) -> bool:
        return now < self.until

    def mark(self) -> str:
        """What a delegated card says."""
        return (
            f"For {self.person}, who is away until {until_text(self.until)}: "
            f"{self.delegate} decides in their place."
        )


def until_text(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


class AwayBook(Protocol):
    """Where away states are kept (`pizzabot.store.away.SqlAway`)."""

    async def set(self, away: Away) -> Away:
        """Keep `away` (replacing the person's earlier one), with its audit entry."""
        ...

    async def back(self, person: str, *, by: str, now: datetime) -> Away | None:
        """End the person's away now (None: they were not away), with its audit entry."""
        ...

    async def current(self, now: datetime) -> list[Away]:
        """Every away state that still holds at `now`."""
        ...


def known_people(skills: SkillBook) -> set[str]:
    """Every person a loaded skill names under `people:`."""
    return {name for s in skills.all() for name in s.people}


def may_delegate(skill: Skill) -> bool:
    """Whether an away state can touch this skill's cards and decisions at all: only where
    the skill names both the away person and their delegate, two people (one is never their
    own delegate), so a skill with fewer needs no reading of the away states."""
    return len(skill.people) >= 2


class AwayAccess(Access):
    """`Access` that lets a delegate decide what the away person may, from a snapshot of
    the away states read from `book` (`refresh`: at each card and each decision)."""

    def __init__(
        self,
        *,
        skills: SkillBook,
        book: AwayBook,
        clock: Callable[[], datetime],
        email_senders: Iterable[str] = (),
    ) -> None:
        super().__init__(skills=skills, email_senders=email_senders)
        self.book = book
        self.clock = clock
        self._away: tuple[Away, ...] = ()

    async def refresh(self) -> Sequence[Away]:
        """Read the away states again; those that hold now."""
        self._away = tuple(await self.book.current(self.clock()))
        return self.active()

    def active(self) -> tuple[Away, ...]:
        now = self.clock()
        return tuple(a for a in self._away if a.holds(now))

    def may_decide(self, who: Principal, item: Item) -> Verdict:
        verdict = super().may_decide(who, item)
        if verdict or who.kind not in ("person", "token"):
            return verdict
        away = self.stands_in_for(who, item)
        if away is None:
            return verdict
        why = f"delegate of {away.person}, who is away until {until_text(away.until)}"
        return Verdict(Act.DECIDE, who, True, why)

    def stands_in_for(self, who: Principal, item: Item) -> Away | None:
        """The away state through which `who` may decide `item`: they are its delegate, and
        the away person may decide the item themselves (None: no such state)."""
        if not who.scope.covers(Scope.DECIDE):
            return None
        skill = self.skills.get(item.skill) if item.skill in self.skills else None
        if skill is None:
            return None
        me = person_of(skill, who)
        for away in self.active():
            if away.delegate != me or away.person == me or away.person not in skill.people:
                continue
            them = Principal.token(
                token_id="away", name=away.person, scope=Scope.DECIDE, person=away.person
            )
            if super().may_decide(them, item):
                return away
        return None

    def away_approvers(self, skill: Skill, tool: str | None) -> list[Away]:
        """The away states of this tool's approvers, whose delegate the skill also names."""
        out = []
        for away in self.active():
            if away.person not in skill.people or away.delegate not in skill.people:
                continue
            them = Principal.token(
                token_id="away", name=away.person, scope=Scope.DECIDE, person=away.person
            )
            if self._approves(them, skill, tool):
                out.append(away)
        return out


async def refreshed(access: Access, skill: Skill) -> AwayAccess | None:
    """`access` with its away states read again, where they can matter to `skill`'s cards
    and decisions; None where they cannot (no away states are kept, or the skill names no
    delegate), and nothing is read."""
    if not isinstance(access, AwayAccess) or not may_delegate(skill):
        return None
    await access.refresh()
    return access


def counted_already(item: Item, by: Principal) -> AlreadyApproved | None:
    """A delegate's approval of an item the away person approved already: their approval
    counts once, whoever gives it (the delegate as themselves is counted by
    `pizzabot.agent.policy.quorum`)."""
    if by.on_behalf is None:
        return None
    away = by.on_behalf[1]
    if any(shown.partition(" via ")[0] == away for shown in item.risk.approved):
        return AlreadyApproved(away, ", ".join(item.risk.approved))
    return None


async def acting_for(access: Access, by: Principal, item: Item) -> Principal:
    """`by`, and if they may decide `item` only as an away person's delegate, `by` acting on
    that person's behalf ("bob for alice"). Reads the away states again first, unless none
    could matter: `by` may decide as themselves, or the item's skill names no delegate."""
    if not isinstance(access, AwayAccess) or Access.may_decide(access, by, item):
        return by
    skill = access.skills.get(item.skill) if item.skill in access.skills else None
    away_access = None if skill is None else await refreshed(access, skill)
    if away_access is None:
        return by
    away = away_access.stands_in_for(by, item)
    if away is None:
        return by
    return replace(by, on_behalf=(away.delegate, away.person))
