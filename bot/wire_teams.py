"""Plugs Microsoft Teams (channels/teams) into the app: the channel cards are posted on through
the Bot Framework connector, and what answers activities at `POST /teams/messages`.

Teams is on when the bot's app id and client secret are set. The Bot Framework posts every
activity to the bot's messaging endpoint (this server's public address and the path above);
each one's token is verified before its body is read. Nothing of `channels.teams` is imported
unless Teams is on.
"""

from __future__ import annotations

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
    from channels.teams import TeamsChannel

log = logging.getLogger("pizzabot.teams")

NAME = "teams"
MESSAGES_PATH = "/teams/messages"


def _secret(value: object) -> str:
    get = getattr(value, "get_secret_value", None)
    return str(get()) if callable(get) else ""


def enabled(settings: Settings) -> bool:
    return bool(settings.teams_app_id and _secret(settings.teams_app_password))


def reaches(settings: Settings) -> bool:
    return enabled(settings)


def token_url(settings: Settings) -> str:
    """Where the app's token comes from: the tenant's endpoint for a single-tenant app, the
    Bot Framework's for a multi-tenant one (unless the settings name another)."""
    tenant = settings.teams_tenant_id or "botframework.com"
    default = f"https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
    return settings.teams_token_url or default


def outlet(settings: Settings, *, store: SqlStore) -> TeamsChannel | None:
    if not enabled(settings):
        return None
    import httpx

    from channels.teams import AppToken, Connector, TeamsChannel

    client = httpx.AsyncClient(timeout=30.0)
    token = AppToken(
        app_id=str(settings.teams_app_id),
        secret=_secret(settings.teams_app_password),
        token_url=token_url(settings),
        client=client,
    )
    connector = Connector(token=token, service_url=settings.teams_service_url, client=client)
    return TeamsChannel(connector=connector, store=store, base_url=settings.base_url)


def build(
    settings: Settings, *, channel: TeamsChannel, core: Core, store: SqlStore, access: Access
) -> ChatParts:
    from channels.chat import ChatDesk
    from channels.teams import TeamsInbound

    desk = ChatDesk(
        channel=NAME,
        platform="Teams",
        inbox=core.inbox,
        runs=core.runs,
        store=store,
        skills=core.ctx.skills,
        access=access,
        base_url=settings.base_url,
        default_skill=settings.teams_default_skill,
    )
    inbound = TeamsInbound(desk=desk, connector=channel.connector, base_url=settings.base_url)
    return ChatParts(channel=channel, inbound=inbound, start=start)


def start(svc: Services) -> None:
    log.info("Teams: messaging endpoint at %s%s", svc.settings.base_url, MESSAGES_PATH)


def install(app: FastAPI, settings: Settings) -> None:
    if not enabled(settings):
        return

    @app.post(MESSAGES_PATH, include_in_schema=False)
    async def teams_messages(request: Request, background: BackgroundTasks) -> Response:
        from channels.teams import CALLER

        svc: Services | None = getattr(request.app.state, "services", None)
        parts = svc.chats.get(NAME) if svc is not None else None
        caller = request.scope.get(CALLER)
        if parts is None or caller is None:
            return JSONResponse({"detail": "Teams is not connected"}, status_code=503)
        try:
            activity: Any = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"detail": "the body is not JSON"}, status_code=400)
        if not isinstance(activity, dict):
            return JSONResponse({"detail": "an activity is a JSON object"}, status_code=400)
        reply = await parts.inbound.handle(activity, caller)
        if reply.later is not None:
            background.add_task(reply.later)
        if reply.body is None:
            return Response(status_code=reply.status)
        return JSONResponse(reply.body, status_code=reply.status)


def gate(app: FastAPI, settings: Settings) -> None:
    """Every activity's Bot Framework token is verified before its body is read."""
    if not enabled(settings):
        return
    import httpx

    from channels.teams import BotFrameworkKeys, TeamsTokenGate

    keys = BotFrameworkKeys(
        app_id=str(settings.teams_app_id),
        openid_url=settings.teams_openid_url,
        client=httpx.AsyncClient(timeout=10.0),
    )
    app.add_middleware(TeamsTokenGate, keys=keys, path=MESSAGES_PATH)
