"""Where the cards go: the channels a process delivers on, and the ones its items are
addressed to. A server delivers on those its settings turn on and on requests' callbacks; a
worker (`pizzabot worker`) on none, addressing its items to its servers' channels (`reach`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pizzabot.agent.channel import Channel
from pizzabot.agent.context import utcnow
from pizzabot.agent.policy import Access
from pizzabot.agent.skills import SkillBook
from pizzabot.bot import wire_chats, wire_email, wire_phone, wire_slack
from pizzabot.bot.settings import Settings, environment
from pizzabot.channels.web.live import Changes
from pizzabot.store.sql import SqlStore

if TYPE_CHECKING:
    from pizzabot.channels.slack import SlackChannel
    from pizzabot.channels.web.phone import PhoneDeps

__all__ = ["Outlets", "outlets", "reach"]


@dataclass(frozen=True)
class Outlets:
    slack: SlackChannel | None
    mail: wire_email.EmailOutlet | None
    #: Push subscriptions and passkeys, for the web page (`pizzabot.bot.wire_phone`).
    phone: PhoneDeps
    #: Every channel this process delivers on, and the ones items are addressed to.
    channels: list[Channel]
    addressed: frozenset[str]
    #: The web page's long-polls, rung whenever the outbox is.
    live: Changes = field(default_factory=Changes)


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
    push = wire_phone.outlet(settings, store=store, access=access) if serving else None
    delivering: list[Channel] = [c for c in (slack, mail.channel if mail else None, push) if c]
    delivering += wire_chats.outlets(settings, store=store) if serving else []
    addressed = frozenset(c.name for c in delivering) if serving else reach(settings)
    if serving:
        delivering.append(_callbacks(settings, store, skills))
    phone = wire_phone.build(settings, push, store=store)
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
    on = {"slack": wire_slack.reaches(settings), "email": wire_email.enabled(settings)}
    on |= wire_chats.reach(settings) | {"push": settings.push}
    return frozenset(name for name, yes in on.items() if yes)
