"""A tool's escalation ladder as the clock walks it, and who is on call for a card.

`ladder` reads a tool's entry (or, for a card one of its rules asked, the entry with that
rule's own ladder: `ToolRule.asked_by`) as steps in time: the older `remind_after`, `escalate_after` /
`escalate_to` and `timeout` / `on_timeout` and the steps of `escalate:`
(`pizzabot.agent.skills.ladder`) are one list, so `pizzabot.agent.timers` walks one thing. Each
step has a key that claims it once per item (the `ItemTimers` store): the old fields keep
theirs (`remind`, `escalate`), a ladder's steps are `step1`, `step2`, ….

`on_call_turns` says, for a pending card, who is on call now in each rota or shift group
that may decide it, with a key per (group, person, shift): the clock sends the card to each
new person once, and the audit names them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pizzabot.agent.addresses import (
    DiscordTarget,
    EmailTarget,
    SlackTarget,
    Target,
    TeamsTarget,
    TelegramTarget,
)
from pizzabot.agent.skills import Escalation, Skill, ToolRule, group_name, is_group

__all__ = ["Rung", "Turn", "ladder", "on_call_turns", "person_targets", "plan_text"]


@dataclass(frozen=True)
class Rung:
    """One step: after `after` seconds without a decision, `remind` (send the card again),
    `widen` (send it to `to`, or the old `escalation`; they may decide it from then on) or
    `end` it (reject, or `halt` the run)."""

    key: str
    after: float
    act: Literal["remind", "widen", "end"]
    to: tuple[str, ...] = ()
    escalation: Escalation | None = None
    halt: bool = False


def ladder(rule: ToolRule) -> list[Rung]:
    """The rule's steps in time order. A `timeout` (a tool's, or a request's own put in its
    place) is the end; otherwise the ladder's `then` step is."""
    rungs: list[Rung] = []
    if rule.remind_after is not None:
        rungs.append(Rung("remind", rule.remind_after, "remind"))
    if rule.escalate_after is not None and rule.escalate_to is not None:
        rungs.append(Rung("escalate", rule.escalate_after, "widen", escalation=rule.escalate_to))
    if rule.timeout is not None:
        rungs.append(Rung("timeout", rule.timeout, "end", halt=rule.on_timeout == "halt"))
    for number, step in enumerate(rule.escalate, 1):
        key = f"step{number}"
        if step.remind:
            rungs.append(Rung(key, step.after, "remind"))
        elif step.to:
            rungs.append(Rung(key, step.after, "widen", to=tuple(step.to)))
        elif rule.timeout is None:
            rungs.append(Rung(key, step.after, "end", halt=step.then == "halt"))
    return sorted(rungs, key=lambda r: r.after)


def _words(seconds: float) -> str:
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def plan_text(rule: ToolRule) -> str | None:
    """The ladder as a card shows it: "30m: sent to group:sre-leads, who may decide · 2h:
    rejected"; None without steps."""
    said: list[str] = []
    for rung in ladder(rule):
        match rung.act:
            case "remind":
                what = "reminder"
            case "widen":
                names = list(rung.to) or ["escalate_to"]
                what = f"sent to {', '.join(names)}, who may decide"
            case "end":
                what = "the run stops" if rung.halt else "rejected"
        said.append(f"{_words(rung.after)}: {what}")
    return " · ".join(said) or None


def person_targets(skill: Skill, people: list[str], channels: frozenset[str]) -> list[Target]:
    """Where a card goes to reach each of `people` themselves: a Slack direct message, their
    address, their Telegram chat, their personal chat on Teams, their Discord direct messages
    (the channel opens the last two)."""
    targets: list[Target] = []
    for name in people:
        person = skill.people.get(name)
        if person is None:
            continue
        if "slack" in channels and person.slack:
            targets.append(SlackTarget(person.slack))
        if "email" in channels and person.email:
            targets.append(EmailTarget(person.email))
        if "telegram" in channels and person.telegram:
            targets.append(TelegramTarget(person.telegram))
        if "teams" in channels and person.teams:
            targets.append(TeamsTarget.to_person(person.teams))
        if "discord" in channels and person.discord:
            targets.append(DiscordTarget.to_person(person.discord))
    return targets


@dataclass(frozen=True)
class Turn:
    """`person` is on call in `group` from `since` until `until`; `key` claims sending them
    the card once (it fits the store's 16 characters)."""

    group: str
    person: str
    since: datetime | None
    until: datetime | None

    @property
    def key(self) -> str:
        since = self.since.isoformat() if self.since else ""
        digest = hashlib.sha256(f"{self.group}|{self.person}|{since}".encode()).hexdigest()
        return f"oc:{digest[:12]}"


def on_call_turns(
    skill: Skill, tool: str, *, at: datetime, asked_at: datetime, asked: int | None = None
) -> list[Turn]:
    """Who is on call at `at` in the rota and shift groups that may decide a card of `tool`
    asked at `asked_at` (the skill's approvers or the tool's `approvals.of`, its escalation,
    and the steps that have come of the ladder: rule `asked`'s, where it has one)."""
    if not skill.groups:  # no rota or shift to be on call in (the clock asks for every item)
        return []
    names: dict[str, None] = {}
    for listed in skill.decider_lists(tool, at, asked_at, asked):
        names.update(dict.fromkeys(n for n in listed.people if is_group(n)))
    turns: list[Turn] = []
    for name in names:
        group = skill.groups.get(group_name(name))
        turn = group.on_call(at) if group is not None else None
        if turn is not None:
            turns += [Turn(group_name(name), p, turn.since, turn.until) for p in turn.people]
    return turns
