"""Saying one is away, or back: who may say it of whom, and what a valid away is.

Every face (the API, so the CLI too; the web page) passes here. A person says it of
themselves; an admin (the owner, an admin token) may say it of anyone. Both names must be
people of a loaded skill (`people:`), the delegate someone else, and `until` in the future
and within a year. A refusal is audited (`away_refused`); a change is audited by the store
(`away_set`, `away_ended`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pizzabot.agent.errors import InvalidArguments, NotAllowed
from pizzabot.agent.policy.away import Away, AwayAccess, known_people
from pizzabot.agent.policy.identity import same_identity
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.store import AuditTrail

__all__ = ["MAX_AWAY", "away_list", "come_back", "go_away", "person_named"]

#: The longest away one can set at once.
MAX_AWAY = timedelta(days=366)


def person_named(access: AwayAccess, who: Principal) -> str | None:
    """The person of the skills' `people:` that `who` is (None: none is)."""
    if who.kind == "owner":
        return "owner"
    if who.kind == "token":
        return who.person
    if who.kind != "person":
        return None
    for skill in access.skills.all():
        for name, person in skill.people.items():
            if same_identity(who.namespace, person.on(who.namespace), who.identity):
                return name
    return None


async def _whose(
    access: AwayAccess, trail: AuditTrail, who: Principal, person: str | None, now: datetime
) -> str:
    """Whose away this is: `person`, which only an admin may name for someone else."""
    me = person_named(access, who)
    target = person or me
    if target is None:
        raise InvalidArguments({"person": f"{who.describe()} is no person of the skills' people:"})
    if target != me and not who.is_admin:
        why = "only an admin may say someone else is away or back"
        await trail.audit(
            action="away_refused",
            actor=who.actor,
            channel=who.channel,
            now=now,
            detail={"person": target, "why": why},
        )
        raise NotAllowed(why)
    return target


async def go_away(
    access: AwayAccess,
    trail: AuditTrail,
    *,
    by: Principal,
    delegate: str,
    until: datetime,
    person: str | None = None,
) -> Away:
    """`person` (default: `by` themselves) is away until `until`, and `delegate` decides
    for them meanwhile."""
    now = access.clock()
    target = await _whose(access, trail, by, person, now)
    people = known_people(access.skills)
    problems: dict[str, str] = {}
    if target not in people:
        problems["person"] = f"{target!r} is not in any skill's people:"
    if delegate not in people:
        problems["delegate"] = f"{delegate!r} is not in any skill's people:"
    elif delegate == target:
        problems["delegate"] = "a delegate is someone else"
    if until.tzinfo is None:
        problems["until"] = "give a time with its zone (UTC: Z)"
    elif until <= now:
        problems["until"] = "that time has passed"
    elif until - now > MAX_AWAY:
        problems["until"] = "at most a year ahead"
    if problems:
        raise InvalidArguments(problems)
    away = Away(person=target, delegate=delegate, until=until, set_by=by.actor, set_at=now)
    kept = await access.book.set(away)
    await access.refresh()
    return kept


async def come_back(
    access: AwayAccess, trail: AuditTrail, *, by: Principal, person: str | None = None
) -> Away | None:
    """`person` (default: `by`) is back now; the away that ended (None: they were not away)."""
    now = access.clock()
    target = await _whose(access, trail, by, person, now)
    ended = await access.book.back(target, by=by.actor, now=now)
    await access.refresh()
    return ended


async def away_list(access: AwayAccess) -> list[Away]:
    """Everyone away now."""
    return list(await access.refresh())
