"""Plugs the chat channels beside Slack (Teams, Discord, Telegram; docs/teams.md,
docs/discord.md, docs/telegram.md) into the app: whether the settings turn each on, the
channel items are delivered on, what answers the platform, its route, and what starts with
the lifespan.

Teams is on when its app id and client secret are set, Discord when its bot token is (and
needs its application id and public key), Telegram when its bot token is (and, in webhook
mode, its secret and the public URL). Each platform's route and registrations are its own
package's (`pizzabot.channels.teams.serve`, …); a package is imported only when it is on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request

from pizzabot.agent.channel import Channel
from pizzabot.agent.policy import Access
from pizzabot.bot.core import Core
from pizzabot.bot.services import ChatParts, Services
from pizzabot.bot.settings import Settings
from pizzabot.store.sql import SqlStore

__all__ = ["PLATFORMS", "build", "enabled", "install", "outlets", "problems", "reach", "start"]

log = logging.getLogger("pizzabot.chats")

#: Each chat channel's name, and the platform's as people know it.
PLATFORMS = {"teams": "Teams", "discord": "Discord", "telegram": "Telegram"}


def _secret(value: object) -> str:
    get = getattr(value, "get_secret_value", None)
    return str(get()) if callable(get) else ""


def enabled(settings: Settings, name: str) -> bool:
    """Whether the settings mean to turn the chat channel `name` on."""
    if name == "teams":
        return bool(settings.teams_app_id and _secret(settings.teams_app_password))
    if name == "discord":
        return bool(_secret(settings.discord_bot_token))
    return bool(_secret(settings.telegram_bot_token))


def problems(settings: Settings, name: str) -> list[str]:
    """What the chat channel `name` still needs (empty when it can start)."""
    missing: list[str] = []
    if name == "discord":
        if not settings.discord_application_id:
            missing.append("PIZZABOT_DISCORD_APPLICATION_ID")
        if not _ed25519_hex(settings.discord_public_key):
            missing.append(
                "PIZZABOT_DISCORD_PUBLIC_KEY (64 hex digits: every interaction is checked)"
            )
    if name == "telegram" and settings.telegram_mode == "webhook":
        if not _secret(settings.telegram_webhook_secret):
            missing.append("PIZZABOT_TELEGRAM_WEBHOOK_SECRET (every update is checked with it)")
        if not settings.public_url:
            missing.append("PIZZABOT_PUBLIC_URL (the https address Telegram posts updates to)")
    return missing


def _ed25519_hex(key: str | None) -> bool:
    try:
        return len(bytes.fromhex(key or "")) == 32
    except ValueError:
        return False


def reach(settings: Settings) -> dict[str, bool]:
    """Whether servers with these settings deliver on each chat channel."""
    return {name: enabled(settings, name) and not problems(settings, name) for name in PLATFORMS}


def outlets(settings: Settings, *, store: SqlStore) -> list[Channel]:
    """The chat channels the settings turn on, each ready to deliver; one that still needs a
    setting stays off, and the log says which."""
    found: list[Channel] = []
    for name, platform in PLATFORMS.items():
        if not enabled(settings, name):
            continue
        missing = problems(settings, name)
        if missing:
            log.error("%s is off: it needs %s", platform, "; ".join(missing))
            continue
        found.append(_outlet(settings, name, store))
    return found


def _outlet(settings: Settings, name: str, store: SqlStore) -> Channel:
    if name == "teams":
        from pizzabot.channels.teams import serve as teams

        return teams.connect(
            app_id=str(settings.teams_app_id),
            secret=_secret(settings.teams_app_password),
            token_url=settings.teams_token_url or teams.token_url(settings.teams_tenant_id),
            service_url=settings.teams_service_url,
            store=store,
            base_url=settings.base_url,
            tenant=settings.teams_tenant_id,
        )
    if name == "discord":
        from pizzabot.channels.discord import DiscordApi, DiscordChannel

        api = DiscordApi(
            token=_secret(settings.discord_bot_token),
            application_id=str(settings.discord_application_id),
            api_url=settings.discord_api_url,
        )
        return DiscordChannel(api=api, store=store, base_url=settings.base_url)
    from pizzabot.channels.telegram import TelegramApi, TelegramChannel

    bot = TelegramApi(token=_secret(settings.telegram_bot_token), api_url=settings.telegram_api_url)
    return TelegramChannel(api=bot, store=store, base_url=settings.base_url)


def build(
    settings: Settings, channels: list[Channel], *, core: Core, store: SqlStore, access: Access
) -> dict[str, ChatParts]:
    """What answers each chat platform whose channel is among `channels`."""
    defaults = {
        "teams": settings.teams_default_skill,
        "discord": settings.discord_default_skill,
        "telegram": settings.telegram_default_skill,
    }
    parts: dict[str, ChatParts] = {}
    for channel in channels:
        if channel.name not in PLATFORMS:
            continue
        from pizzabot.channels.chat import ChatDesk

        desk = ChatDesk(
            channel=channel.name,
            platform=PLATFORMS[channel.name],
            inbox=core.inbox,
            runs=core.runs,
            store=store,
            skills=core.ctx.skills,
            access=access,
            base_url=settings.base_url,
            default_skill=defaults[channel.name],
        )
        parts[channel.name] = ChatParts(
            channel=channel, inbound=_inbound(channel, desk, settings.base_url)
        )
    return parts


def _inbound(channel: Any, desk: Any, base_url: str) -> Any:
    """The platform's inbound side, sharing the channel's client (typed by its package)."""
    if channel.name == "teams":
        from pizzabot.channels.teams import TeamsInbound

        return TeamsInbound(desk=desk, connector=channel.connector, base_url=base_url)
    if channel.name == "discord":
        from pizzabot.channels.discord import DiscordInbound

        return DiscordInbound(desk=desk, api=channel.api)
    from pizzabot.channels.telegram import TelegramInbound

    return TelegramInbound(desk=desk, api=channel.api)


def _finder(name: str) -> Callable[[Request], Any]:
    """How a route finds its platform's inbound side: the services exist only once the
    lifespan has started."""

    def find(request: Request) -> Any:
        svc: Services | None = getattr(request.app.state, "services", None)
        parts = svc.chats.get(name) if svc is not None else None
        return parts.inbound if parts is not None else None

    return find


def install(app: FastAPI, settings: Settings) -> None:
    """Each platform's route with its check, where the settings turn it on. The checks are
    added before `server.guard` adds the size and time limits, so they run after those, on
    the limited body, and before any route reads it."""
    on = reach(settings)
    if on["teams"]:
        from pizzabot.channels.teams import serve as teams

        teams.install(
            app,
            app_id=str(settings.teams_app_id),
            openid_url=settings.teams_openid_url,
            find=_finder("teams"),
        )
    if on["discord"]:
        from pizzabot.channels.discord import serve as discord

        discord.install(app, public_key=str(settings.discord_public_key), find=_finder("discord"))
    if on["telegram"] and settings.telegram_mode == "webhook":
        from pizzabot.channels.telegram import serve as telegram

        secret = _secret(settings.telegram_webhook_secret)
        telegram.install(app, secret=secret, find=_finder("telegram"))


def start(svc: Services) -> None:
    """Each platform's receivers and registrations (one process each, like the outbox)."""
    base_url = svc.settings.base_url
    for name in svc.chats:
        _warn_unused(svc, name)
    if "teams" in svc.chats:
        from pizzabot.channels.teams.serve import MESSAGES_PATH

        log.info("Teams: messaging endpoint at %s%s", base_url, MESSAGES_PATH)
    if "discord" in svc.chats:
        from pizzabot.channels.discord import serve as discord

        api = svc.chats["discord"].inbound.api
        discord.start(api, spawn=svc.spawn_singleton, base_url=base_url)
    if "telegram" in svc.chats:
        from pizzabot.channels.telegram import serve as telegram

        settings = svc.settings
        webhook = settings.telegram_mode == "webhook"
        telegram.start(
            svc.chats["telegram"].inbound,
            spawn=svc.spawn_singleton,
            webhook_url=base_url + telegram.WEBHOOK_PATH if webhook else None,
            secret=_secret(settings.telegram_webhook_secret),
            poll_timeout=settings.telegram_poll_timeout,
        )


def _warn_unused(svc: Services, name: str) -> None:
    """Name the skills nobody can decide on this platform."""
    nobody = [s.name for s in svc.ctx.skills.all() if not s.approvers_for(None, name)]
    if nobody:
        log.warning(
            "%s: nobody can decide items of these skills there (no approvers.%s): %s",
            PLATFORMS[name],
            name,
            ", ".join(nobody),
        )
