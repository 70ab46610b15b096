"""Groups of people, named once and used wherever a skill names who decides.

A group is a set of people from `people:` ("sre": alice, bob), or a rota whose members take
turns (`pizzabot.agent.skills.rota`): then only whoever is on call now is in it. Approvers,
two-person rules (`approvals: {required: 2, of: group:finance}`) and escalation steps name a
group as `group:NAME` beside the names of people (a person's name has no colon).

Groups live in a skill file's `groups:` and in `groups.yaml` in the skills folder, which
every skill of the folder shares (with the people it lists: see `SharedGroups`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.people import Person
from pizzabot.agent.skills.rota import OnCall, Shifts, WeeklyRota

__all__ = ["GROUP", "Group", "SharedGroups", "group_name", "is_group", "known_names"]

#: How a list of people names a group: `group:sre`.
GROUP = "group:"


def is_group(name: str) -> bool:
    return name.startswith(GROUP)


def group_name(name: str) -> str:
    """`sre` of `group:sre`."""
    return name.removeprefix(GROUP)


def known_names(
    where: tuple[str | int, ...],
    names: Iterable[str],
    people: Mapping[str, Person],
    groups: Mapping[str, Group] | None,
) -> None:
    """Refuse, at `where`, a name that is no person of `people` nor (where `groups` are
    allowed) `group:NAME` of `groups`."""
    for name in names:
        if groups is not None and is_group(name):
            if group_name(name) in groups:
                continue
            known = ", ".join(sorted(groups)) or "none"
            message = (
                f"{name!r} is not a group (groups: {known}); define it under groups: "
                "in this file or in groups.yaml in the skills folder"
            )
        elif name in people:
            continue
        else:
            known = ", ".join(sorted(people)) or "none"
            message = (
                f"{name!r} is not in people (people: {known}); "
                "list a person under people: with their slack id and email"
            )
        raise PydanticCustomError("unknown_name", "{message}", {"message": message, "where": where})


class Group(Strict):
    """One group: `members` (people's names), or a `rota` of weekly turns, or `shifts` from
    a calendar file; with a rota or shifts, the group is whoever is on call at the moment
    asked about (`on_call`)."""

    members: list[str] = []
    rota: WeeklyRota | None = None
    shifts: Shifts | None = None

    @model_validator(mode="before")
    @classmethod
    def _list(cls, value: Any) -> Any:
        # `sre: [alice, bob]` is the short form of `sre: {members: [alice, bob]}`.
        return {"members": value} if isinstance(value, list) else value

    @model_validator(mode="after")
    def _one_kind(self) -> Group:
        kinds = [k for k in ("members", "rota", "shifts") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError("a group has one of members (a list of people), rota or shifts")
        return self

    @property
    def named(self) -> list[str]:
        """Every person the group may ever hold (members, or everyone on the rota; for
        shifts, the people the calendar names)."""
        if self.rota is not None:
            return list(self.rota.people)
        if self.shifts is not None:
            return self.shifts.named()
        return list(self.members)

    def on_call(self, at: datetime) -> OnCall | None:
        """Who holds a rota's or a calendar's turn at `at`; None for a group of members."""
        if self.rota is not None:
            return self.rota.on_call(at)
        if self.shifts is not None:
            return self.shifts.on_call(at)
        return None

    def now(self, at: datetime) -> list[str]:
        """The people in the group at `at`."""
        turn = self.on_call(at)
        return list(self.members) if turn is None else list(turn.people)


class SharedGroups(Strict):
    """`groups.yaml` in the skills folder: groups (and the people they name) that every skill
    of the folder may use. A skill that defines a person or a group of the same name too must
    define it the same way."""

    people: dict[str, Person] = {}
    groups: dict[str, Group] = {}

    @model_validator(mode="after")
    def _named(self) -> SharedGroups:
        for name, group in self.groups.items():
            known_names(("groups", name), group.named, self.people, None)
        return self
