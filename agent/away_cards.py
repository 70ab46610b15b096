"""Cards while someone is away: the away person's copies go to their delegate, and every
copy says so.

Where a card is addressed to an approver who is away (`pizzabot.agent.policy.away`) — their
Slack direct messages, their mail address among `deliver:` — it goes to their delegate's
identity on that channel instead (or, where the delegate has none there, to the delegate's
identities on the configured channels). Every card of such a tool, wherever it goes (a shared
Slack channel too), starts with "For alice, who is away until …: bob decides in their
place." A card made after the away ended goes where `deliver:` says, unmarked.

Used where the engine makes cards for a call (`pizzabot.agent.calls`) and for a request
(`pizzabot.agent.requests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from pizzabot.agent.addresses import EmailTarget, SlackTarget, Target
from pizzabot.agent.context import Context
from pizzabot.agent.model import Item
from pizzabot.agent.policy.away import Away, AwayAccess
from pizzabot.agent.policy.identity import EMAIL, SLACK, same_identity
from pizzabot.agent.skills import Skill

__all__ = ["delegated_targets", "route_cards"]

E = TypeVar("E")


async def route_cards(
    ctx: Context, skill: Skill, cards: Sequence[tuple[Item, E]], targets: Sequence[Target]
) -> tuple[list[tuple[Item, E]], list[Target]]:
    """The cards, marked where an approver of their tool is away, and the targets with the
    away approvers' own addresses given to their delegates."""
    access = ctx.access
    if not isinstance(access, AwayAccess) or not cards:
        return list(cards), list(targets)
    await access.refresh()
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
    access = ctx.access
    if not isinstance(access, AwayAccess):
        return list(targets)
    await access.refresh()
    routed = list(targets)
    for away in access.away_approvers(skill, tool):
        routed = _to_delegate(skill, away, routed, ctx.channels)
    return routed


def _to_delegate(
    skill: Skill, away: Away, targets: list[Target], channels: frozenset[str]
) -> list[Target]:
    """`targets` with `away.person`'s addresses replaced by their delegate's."""
    person, delegate = skill.people[away.person], skill.people[away.delegate]
    out: list[Target] = []
    moved = False
    for target in targets:
        if isinstance(target, EmailTarget) and same_identity(EMAIL, target.address, person.email):
            moved = True
            if delegate.email:
                out.append(EmailTarget(delegate.email))
        elif isinstance(target, SlackTarget) and same_identity(
            SLACK, target.conversation, person.slack
        ):
            moved = True
            if delegate.slack:
                out.append(SlackTarget(delegate.slack))
        else:
            out.append(target)
    if moved and not _reaches(out, delegate.email, delegate.slack):
        if delegate.email and EMAIL in channels:
            out.append(EmailTarget(delegate.email))
        if delegate.slack and SLACK in channels:
            out.append(SlackTarget(delegate.slack))
    unique: list[Target] = []
    for target in out:
        if target not in unique:
            unique.append(target)
    return unique


def _reaches(targets: list[Target], email: str | None, slack: str | None) -> bool:
    return any(
        (isinstance(t, EmailTarget) and same_identity(EMAIL, t.address, email))
        or (isinstance(t, SlackTarget) and same_identity(SLACK, t.conversation, slack))
        for t in targets
    )
