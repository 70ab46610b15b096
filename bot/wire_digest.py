"""Plugs the daily digest (`pizzabot.agent.digest`) into the server: Slack direct messages and mails
through the channels the settings turn on, the server's default time (`PIZZABOT_DIGEST_AT`,
`PIZZABOT_DIGEST_TIMEZONE`), and a loop that one leader among the servers runs. Each digest
is also recorded by a row before it is sent, so a hand-over of the leadership cannot send
one twice.
"""

from __future__ import annotations

import asyncio
import logging

from pizzabot.agent.digest import Digests, DigestSender
from pizzabot.agent.skills import DigestAt
from pizzabot.agent.tasks import stop_if_cancelled
from pizzabot.bot.services import Services
from pizzabot.store.mail import SqlMailLog

log = logging.getLogger(__name__)


def build(svc: Services) -> Digests | None:
    """The digests of this server, or None when no channel can carry them."""
    senders: dict[str, DigestSender] = {}
    if svc.slack is not None:
        from pizzabot.channels.slack.digest import SlackDigest

        senders["slack"] = SlackDigest(client=svc.slack.channel.client)
    if svc.email is not None:
        from pizzabot.channels.email.digest import EmailDigest

        channel = svc.email.channel
        senders["email"] = EmailDigest(mailer=channel.mailer, identity=channel.identity)
    if not senders:
        return None
    settings = svc.settings
    default = (
        DigestAt(at=settings.digest_at, timezone=settings.digest_timezone)
        if settings.digest_at
        else None
    )
    return Digests(
        ctx=svc.ctx,
        access=svc.access,
        senders=senders,
        once_keys=SqlMailLog(svc.store),
        default=default,
    )


def start(svc: Services) -> None:
    digests = build(svc)
    if digests is None:
        return
    interval = svc.settings.digest_interval

    async def loop() -> None:
        while True:
            stop_if_cancelled()
            try:
                await digests.tick()
            except Exception:
                log.exception("digest pass failed")
            await asyncio.sleep(interval)

    svc.spawn_singleton("digest", loop)
