"""Where the cards go: the channels a process delivers on, and the ones its items are
addressed to.

A server delivers on the channels its settings turn on (Slack, mail, Web Push) and on
requests' callbacks. A worker (`pizzabot worker`) delivers on none: it addresses its items
to the channels its servers deliver on (`reach`), whose outboxes send them. The phone's parts
(`pizzabot.bot.wire_phone`) are made here too, since its push channel is one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pizzabot.agent.channel import Channel
from pizzabot.agent.context import utcnow
from pizzabot.agent.policy import Access
from pizzabot.agent.skills import SkillBook
from pizzabot.bot import wire_email, wire_phone, wire_slack
from pizzabot.bot.settings import Settings, environment
from pizzabot.store.sql import SqlStore

if TYPE_CHECKING:
    from pizzabot.channels.slack import SlackChannel

__all__ = ["Outlets", "outlets", "reach"]


@dataclass(frozen=True)
class Outlets:
    slack: SlackChannel | None
    mail: wire_email.EmailOutlet | None
    #: Web Push and passkeys (its push channel is in `channels` where this process serves).
    phone: wire_phone.Phone
    #: Every channel this process delivers on, requests' callbacks included.
    channels: list[Channel]
    #: The channels items are addressed to.
    addressed: frozenset[str]


def outlets(
    settings: Settings, store: SqlStore, access: Access, skills: SkillBook, serving: bool
) -> Outlets:
    """The channels this process delivers on (none in a worker), and the ones items are
    addressed to: the channels people are on (a worker's are its servers'), while requests'
    callbacks are their own."""
    slack = wire_slack.outlet(settings, store=store) if serving else None
    mail = (
        wire_email.outlet(settings, store=store, access=access, clock=utcnow) if serving else None
    )
    phone = wire_phone.build(settings, store=store, access=access)
    mine = (slack, mail.channel if mail else None, phone.channel if serving else None)
    delivering: list[Channel] = [c for c in mine if c is not None]
    addressed = frozenset(c.name for c in delivering) if serving else reach(settings)
    if serving:
        delivering.append(_callbacks(settings, store, skills))
    return Outlets(slack, mail, phone, delivering, addressed)


def _callbacks(settings: Settings, store: SqlStore, skills: SkillBook) -> Channel:
    """Requests' callbacks, signed with the secret their skill's `callback_secret_env` names."""
    from pizzabot.channels.callback import CallbackChannel

    def secret_for(skill: str) -> str | None:
        env = skills.get(skill).callback_secret_env if skill in skills else None
        return environment().get(env) if env else None

    return CallbackChannel(store=store, secret_for=secret_for, base_url=settings.base_url)


def reach(settings: Settings) -> frozenset[str]:
    """The channels servers with these settings deliver on."""
    on = {
        "slack": wire_slack.reaches(settings),
        "email": wire_email.enabled(settings),
        "push": wire_phone.reaches(settings),
    }
    return frozenset(name for name, yes in on.items() if yes)
