"""Teams on the app: the channel that posts through the Bot Framework connector with the
app's own token, and `POST /teams/messages` behind the check of every activity's Bot
Framework token.

The composition root hands in the settings' values and how a request finds the running
inbound side; nothing here reads the settings.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
from fastapi import BackgroundTasks, FastAPI, Request, Response
from fastapi.responses import JSONResponse

from pizzabot.channels.chat.serving import not_connected, read_object
from pizzabot.channels.teams.auth import AppToken, BotFrameworkKeys
from pizzabot.channels.teams.channel import TeamsChannel, TeamsStore
from pizzabot.channels.teams.connector import Connector
from pizzabot.channels.teams.gate import CALLER, TeamsTokenGate
from pizzabot.channels.teams.inbound import TeamsInbound

__all__ = ["MESSAGES_PATH", "connect", "install", "token_url"]

MESSAGES_PATH = "/teams/messages"


def token_url(tenant: str | None) -> str:
    """Where the app's token comes from: the tenant's endpoint for a single-tenant app, the
    Bot Framework's for a multi-tenant one."""
    return f"https://login.microsoftonline.com/{tenant or 'botframework.com'}/oauth2/v2.0/token"


def connect(
    *,
    app_id: str,
    secret: str,
    token_url: str,
    service_url: str,
    store: TeamsStore,
    base_url: str,
    tenant: str | None = None,
) -> TeamsChannel:
    """The channel cards are posted on, with the app's token from `token_url`; `service_url`
    is where cards go for a conversation the bot has not heard from since it started, and
    `tenant` the one a person's personal chat is opened in."""
    client = httpx.AsyncClient(timeout=30.0)
    token = AppToken(app_id=app_id, secret=secret, token_url=token_url, client=client)
    connector = Connector(
        token=token, service_url=service_url, client=client, bot_id=app_id, tenant=tenant
    )
    return TeamsChannel(connector=connector, store=store, base_url=base_url)


def install(
    app: FastAPI,
    *,
    app_id: str,
    openid_url: str,
    find: Callable[[Request], TeamsInbound | None],
) -> None:
    """The messaging endpoint, and its gate: an activity whose token does not verify for
    `app_id` (with the keys `openid_url` publishes) is refused before its body is read."""
    keys = BotFrameworkKeys(
        app_id=app_id, openid_url=openid_url, client=httpx.AsyncClient(timeout=10.0)
    )
    app.add_middleware(TeamsTokenGate, keys=keys, path=MESSAGES_PATH)

    @app.post(MESSAGES_PATH, include_in_schema=False)
    async def teams_messages(request: Request, background: BackgroundTasks) -> Response:
        inbound = find(request)
        caller = request.scope.get(CALLER)
        if inbound is None or caller is None:
            return not_connected("Teams")
        activity = await read_object(request, "an activity")
        if isinstance(activity, Response):
            return activity
        reply = await inbound.handle(activity, caller)
        if reply.later is not None:
            background.add_task(reply.later)
        if reply.body is None:
            return Response(status_code=reply.status)
        return JSONResponse(reply.body, status_code=reply.status)
