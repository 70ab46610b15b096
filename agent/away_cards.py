"""Cards while someone is away: the away person's copies go to their delegate, and every
copy says so.

Where a card is addressed to an approver who is away (`pizzabot.agent.policy.away`) — their
Slack direct messages, their mail address among `deliver:`, their own chat on Teams, Discord
or Telegram — it goes to their delegate's identity on that channel instead (or, where the
delegate has none there, to the delegate's identities on the configured channels). Every card of such a tool, wherever it goes (a shared
Slack channel too), starts with "For alice, who is away until …: bob decides in their
place." A card made after the away ended goes where `deliver:` says, unmarked.

Used where the engine makes cards for a call (`pizzabot.agent.calls`) and for a request
(`pizzabot.agent.requests`), and where a widening step or an on-call hand-over sends one to
someone who is away (`pizzabot.agent.timers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from pizzabot.agent.addresses import (
    DiscordTarget,
    EmailTarget,
    SlackTarget,
    Target,
    TeamsTarget,
    TelegramTarget,
)
from pizzabot.agent.context import Context
from pizzabot.agent.escalation import person_targets
from pizzabot.agent.model import Item
from pizzabot.agent.policy.away import Away, refreshed
from pizzabot.agent.policy.identity import DISCORD, EMAIL, SLACK, TEAMS, TELEGRAM, same_identity
from pizzabot.agent.skills import Person, Skill

__all__ = ["delegated_people", "delegated_targets", "route_cards"]

E = TypeVar("E")


async def route_cards(
    ctx: Context, skill: Skill, cards: Sequence[tuple[Item, E]], targets: Sequence[Target]
) -> tuple[list[tuple[Item, E]], list[Target]]:
    """The cards, marked where an approver of their tool is away, and the targets with the
    away approvers' own addresses given to their delegates."""
    access = await refreshed(ctx.access, skill) if cards else None
    if access is None:
        return list(cards), list(targets)
    tools = {item.tool for item, _ in cards}
    aways = {a.person: a for t in tools for a in access.away_approvers(skill, t)}
    if not aways:
        return list(cards), list(targets)
    routed = list(targets)
    for away in aways.values():
        routed = _to_delegate(skill, away, routed, ctx.channels)
    mark = "\n".join(a.mark() for a in aways.values())
    marked = [(replace(item, body=f"{mark}\n\n{item.body}".strip()), e) for item, e in cards]
    return marked, routed


async def delegated_targets(
    ctx: Context, skill: Skill, tool: str | None, targets: Sequence[Target]
) -> list[Target]:
    """`targets` for a card of `tool` made earlier (a reminder): the away approvers'
    addresses given to their delegates."""
    access = await refreshed(ctx.access, skill)
    if access is None:
        return list(targets)
    routed = list(targets)
    for away in access.away_approvers(skill, tool):
        routed = _to_delegate(skill, away, routed, ctx.channels)
    return routed


async def delegated_people(
    ctx: Context, skill: Skill, people: Sequence[str], targets: Sequence[Target]
) -> list[Target]:
    """`targets` made for `people` (a widening step, an on-call hand-over): the addresses of
    those of them who are away given to their delegates."""
    access = await refreshed(ctx.access, skill)
    if access is None:
        return list(targets)
    routed = list(targets)
    for away in access.active():
        if away.person in people and {away.person, away.delegate} <= set(skill.people):
            routed = _to_delegate(skill, away, routed, ctx.channels)
    return routed


def _to_delegate(
    skill: Skill, away: Away, targets: list[Target], channels: frozenset[str]
) -> list[Target]:
    """`targets` with `away.person`'s own addresses replaced by their delegate's."""
    person = skill.people[away.person]
    out: list[Target] = []
    moved = False
    for target in targets:
        if _owns(person, target):
            moved = True
            out += person_targets(skill, [away.delegate], frozenset({target.kind}) & channels)
        else:
            out.append(target)
    if moved and not any(t in out for t in person_targets(skill, [away.delegate], channels)):
        out += person_targets(skill, [away.delegate], channels)
    unique: list[Target] = []
    for target in out:
        if target not in unique:
            unique.append(target)
    return unique


def _owns(person: Person, target: Target) -> bool:
    """Whether `target` reaches `person` themselves: their mail, their Slack direct
    messages, their own chat on Teams, Discord or Telegram."""
    match target:
        case EmailTarget():
            return same_identity(EMAIL, target.address, person.email)
        case SlackTarget():
            return same_identity(SLACK, target.conversation, person.slack)
        case TeamsTarget():
            return same_identity(TEAMS, target.person, person.teams)
        case DiscordTarget():
            return same_identity(DISCORD, target.person, person.discord)
        case TelegramTarget():
            return same_identity(TELEGRAM, target.chat, person.telegram)
    return False
