"""Discord on the app: `POST /discord/interactions` behind the check of every interaction's
Ed25519 signature, and the `/pizza` command's registration with Discord.

The composition root hands in the settings' values and how a request finds the running
inbound side; nothing here reads the settings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import BackgroundTasks, FastAPI, Request, Response
from fastapi.responses import JSONResponse

from pizzabot.channels.chat.serving import Spawn, not_connected, read_object, until_taken
from pizzabot.channels.discord.api import DiscordApi, DiscordError
from pizzabot.channels.discord.gate import DiscordSignatureGate
from pizzabot.channels.discord.inbound import DiscordInbound

__all__ = ["COMMAND", "INTERACTIONS_PATH", "install", "register_command", "start"]

log = logging.getLogger(__name__)

INTERACTIONS_PATH = "/discord/interactions"

#: The one command, as Discord registers it (global, every server the app is in).
COMMAND: dict[str, Any] = {
    "name": "pizza",
    "type": 1,
    "description": "Start a Pizza Bot run: SKILL what to do",
    "options": [{"type": 3, "name": "text", "description": "SKILL what to do", "required": False}],
}


def install(
    app: FastAPI, *, public_key: str, find: Callable[[Request], DiscordInbound | None]
) -> None:
    """The interactions route, and its gate: an interaction whose signature does not verify
    against `public_key` (hex) is refused before its body is parsed."""
    app.add_middleware(DiscordSignatureGate, public_key=public_key, path=INTERACTIONS_PATH)

    @app.post(INTERACTIONS_PATH, include_in_schema=False)
    async def discord_interactions(request: Request, background: BackgroundTasks) -> Response:
        inbound = find(request)
        if inbound is None:
            return not_connected("Discord")
        interaction = await read_object(request, "an interaction")
        if isinstance(interaction, Response):
            return interaction
        answer = await inbound.handle(interaction)
        if answer.later is not None:
            background.add_task(answer.later)  # after the answer: inside Discord's 3 s
        return JSONResponse(answer.body)


async def register_command(api: DiscordApi) -> None:
    """Register `/pizza` (a bulk overwrite: the app's commands are exactly this one), until
    Discord takes it."""
    path = f"/applications/{api.application_id}/commands"
    await until_taken(
        lambda: api.request("PUT", path, json=[COMMAND]),
        what="Discord: registering /pizza",
        refused=DiscordError,
        log=log,
    )


def start(api: DiscordApi, *, spawn: Spawn, base_url: str) -> None:
    """Register `/pizza` in one process of all (`spawn` runs a singleton); interactions come
    to the route at `base_url`."""
    spawn("discord-command", lambda: register_command(api))
    log.info("Discord: interactions at %s%s", base_url, INTERACTIONS_PATH)
