"""Where a skill's items are delivered: its `deliver:` block, limited to configured channels.

One function for the engine's first delivery of an item and the clock's reminders and
escalations, so the two never disagree about where an item goes. Where Web Push is on, an
item also goes to the subscribed devices of whoever may see it (`pizzabot.channels.push` fans that
one target out per device).
"""

from __future__ import annotations

from pizzabot.agent.addresses import (
    DiscordTarget,
    EmailTarget,
    PushTarget,
    SlackTarget,
    Target,
    TeamsTarget,
    TelegramTarget,
)
from pizzabot.agent.skills import Deliver, Skill

__all__ = ["deliver_targets", "targets_for"]


def deliver_targets(deliver: Deliver, channels: frozenset[str]) -> list[Target]:
    """Where a `deliver:`-shaped block sends items, limited to the configured channels."""
    targets: list[Target] = []
    if "slack" in channels and deliver.slack:
        targets.append(SlackTarget(deliver.slack))
    if "email" in channels:
        targets.extend(EmailTarget(a) for a in deliver.email)
    if "teams" in channels and deliver.teams:
        targets.append(TeamsTarget(deliver.teams))
    if "discord" in channels and deliver.discord:
        targets.append(DiscordTarget(deliver.discord))
    if "telegram" in channels and deliver.telegram:
        targets.append(TelegramTarget(deliver.telegram))
    if "push" in channels:
        targets.append(PushTarget())
    return targets


def targets_for(skill: Skill, channels: frozenset[str]) -> list[Target]:
    """Where a skill's items go, limited to the channels that are configured."""
    return deliver_targets(skill.deliver, channels)
