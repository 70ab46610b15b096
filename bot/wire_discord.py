"""Plugs Discord (channels/discord) into the app: the channel items are posted on, what answers
interactions at `POST /discord/interactions`, and the `/pizza` command's registration.

Discord is on when the application id, its public key and the bot token are set. Discord
posts every interaction to the app's Interactions Endpoint URL (this server's public address
and the path above); each one's Ed25519 signature is checked before its body is parsed.
Nothing of `channels.discord` is imported unless Discord is on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from fastapi import BackgroundTasks, FastAPI, Request, Response
from fastapi.responses import JSONResponse

from agent.policy import Access
from bot.core import Core
from bot.services import ChatParts, Services
from bot.settings import Settings
from store.sql import SqlStore

if TYPE_CHECKING:
    from channels.discord import DiscordChannel

log = logging.getLogger("pizzabot.discord")

NAME = "discord"
INTERACTIONS_PATH = "/discord/interactions"

#: The one command, as Discord registers it (global, every server the app is in).
COMMAND: dict[str, Any] = {
    "name": "pizza",
    "type": 1,
    "description": "Start a Pizza Bot run: SKILL what to do",
    "options": [{"type": 3, "name": "text", "description": "SKILL what to do", "required": False}],
}


def _secret(value: object) -> str:
    get = getattr(value, "get_secret_value", None)
    return str(get()) if callable(get) else ""


def enabled(settings: Settings) -> bool:
    return bool(_secret(settings.discord_bot_token))


def problems(settings: Settings) -> list[str]:
    missing: list[str] = []
    if not settings.discord_application_id:
        missing.append("PIZZABOT_DISCORD_APPLICATION_ID")
    key = settings.discord_public_key or ""
    try:
        usable = len(bytes.fromhex(key)) == 32
    except ValueError:
        usable = False
    if not usable:
        missing.append("PIZZABOT_DISCORD_PUBLIC_KEY (64 hex digits: every interaction is checked)")
    return missing


def reaches(settings: Settings) -> bool:
    return enabled(settings) and not problems(settings)


def outlet(settings: Settings, *, store: SqlStore) -> DiscordChannel | None:
    if not enabled(settings):
        return None
    missing = problems(settings)
    if missing:
        log.error("Discord is off: it needs %s", "; ".join(missing))
        return None
    from channels.discord import DiscordApi, DiscordChannel

    api = DiscordApi(
        token=_secret(settings.discord_bot_token),
        application_id=str(settings.discord_application_id),
        api_url=settings.discord_api_url,
    )
    return DiscordChannel(api=api, store=store, base_url=settings.base_url)


def build(
    settings: Settings, *, channel: DiscordChannel, core: Core, store: SqlStore, access: Access
) -> ChatParts:
    from channels.chat import ChatDesk
    from channels.discord import DiscordInbound

    desk = ChatDesk(
        channel=NAME,
        platform="Discord",
        inbox=core.inbox,
        runs=core.runs,
        store=store,
        skills=core.ctx.skills,
        access=access,
        base_url=settings.base_url,
        default_skill=settings.discord_default_skill,
    )
    return ChatParts(
        channel=channel, inbound=DiscordInbound(desk=desk, api=channel.api), start=start
    )


def start(svc: Services) -> None:
    svc.spawn_singleton("discord-command", lambda: _register(svc))
    log.info("Discord: interactions at %s%s", svc.settings.base_url, INTERACTIONS_PATH)


async def _register(svc: Services) -> None:
    """Register `/pizza` (a bulk overwrite: the app's commands are exactly this one), until
    Discord takes it."""
    from channels.discord import DiscordError

    api = svc.chats[NAME].inbound.api
    wait = 1.0
    while True:
        try:
            await api.request("PUT", f"/applications/{api.application_id}/commands", json=[COMMAND])
            return
        except DiscordError as exc:
            log.warning("Discord: registering /pizza failed (%s); again in %.0f s", exc, wait)
            await asyncio.sleep(wait)
            wait = min(wait * 2, 300.0)


def install(app: FastAPI, settings: Settings) -> None:
    if not enabled(settings):
        return

    @app.post(INTERACTIONS_PATH, include_in_schema=False)
    async def discord_interactions(request: Request, background: BackgroundTasks) -> Response:
        svc: Services | None = getattr(request.app.state, "services", None)
        parts = svc.chats.get(NAME) if svc is not None else None
        if parts is None:
            return JSONResponse({"detail": "Discord is not connected"}, status_code=503)
        try:
            interaction: Any = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"detail": "the body is not JSON"}, status_code=400)
        if not isinstance(interaction, dict):
            return JSONResponse({"detail": "an interaction is a JSON object"}, status_code=400)
        answer = await parts.inbound.handle(interaction)
        if answer.later is not None:
            background.add_task(answer.later)  # after the answer: inside Discord's 3 s
        return JSONResponse(answer.body)


def gate(app: FastAPI, settings: Settings) -> None:
    """Every interaction's signature is checked before its body is parsed."""
    if not reaches(settings):
        return
    from channels.discord import DiscordSignatureGate

    app.add_middleware(
        DiscordSignatureGate, public_key=str(settings.discord_public_key), path=INTERACTIONS_PATH
    )
