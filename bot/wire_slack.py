"""Plugs the Slack channel (channels/slack) into the app: the channel items are delivered on,
what answers Slack (listeners, Home tabs), its route, and its receivers in the lifespan.

Slack is on when a bot token is set. Socket Mode (the default, with the app-level token) needs
no public URL; HTTP mode serves Bolt's handler at `POST /slack/events` of this same app. Home
tabs are republished by one process (like the outbox), woken whenever the outbox is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from pizzabot.agent.policy import Access
from pizzabot.bot.core import Core
from pizzabot.bot.services import Services, SlackParts
from pizzabot.bot.settings import Settings
from pizzabot.store.sql import SqlStore

if TYPE_CHECKING:
    from slack_bolt.app.async_app import AsyncApp

    from pizzabot.channels.slack import SlackChannel

log = logging.getLogger("pizzabot.slack")

EVENTS_PATH = "/slack/events"


def _secret(value: object) -> str:
    get = getattr(value, "get_secret_value", None)
    return str(get()) if callable(get) else ""


def problems(settings: Settings) -> list[str]:
    """What is missing for the chosen mode (empty when Slack can start)."""
    missing: list[str] = []
    if settings.slack_mode == "http" and not _secret(settings.slack_signing_secret):
        missing.append("PIZZABOT_SLACK_SIGNING_SECRET (HTTP mode checks every request with it)")
    if settings.slack_mode == "socket" and not _secret(settings.slack_app_token):
        missing.append("PIZZABOT_SLACK_APP_TOKEN (an xapp- token with connections:write)")
    return missing


def enabled(settings: Settings) -> bool:
    return bool(_secret(settings.slack_bot_token))


def outlet(settings: Settings, *, store: SqlStore) -> SlackChannel | None:
    """The Slack channel items are delivered on, when the settings turn Slack on and hold
    what the chosen mode needs (else None, and the log says what is missing)."""
    if not enabled(settings):
        return None
    missing = problems(settings)
    if missing:
        log.error("Slack is off: %s mode needs %s", settings.slack_mode, "; ".join(missing))
        return None
    from slack_sdk.web.async_client import AsyncWebClient

    from pizzabot.channels.slack import SlackChannel

    token = _secret(settings.slack_bot_token)
    client = (
        AsyncWebClient(token=token, base_url=settings.slack_api_url)
        if settings.slack_api_url
        else AsyncWebClient(token=token)
    )
    return SlackChannel(client=client, store=store, base_url=settings.base_url)


def reaches(settings: Settings) -> bool:
    """Whether a server with these settings delivers on Slack (without saying why not)."""
    return enabled(settings) and not problems(settings)


def build(
    settings: Settings,
    *,
    channel: SlackChannel | None,
    core: Core,
    store: SqlStore,
    access: Access,
    bell: asyncio.Event,
) -> SlackParts | None:
    """What answers Slack: the listeners, the Home tabs (republished when `bell` rings: it is
    rung with the outbox, as whatever wakes the outbox changed someone's items) and, in HTTP
    mode, the handler of `POST /slack/events`. None without the channel."""
    if channel is None:
        return None
    from pizzabot.channels.slack import HomeTabs, SlackInbound, build_app

    inbound = SlackInbound(
        inbox=core.inbox,
        runs=core.runs,
        store=store,
        skills=core.ctx.skills,
        access=access,
        base_url=settings.base_url,
        default_skill=settings.slack_default_skill,
    )
    home = HomeTabs(client=channel.client, inbound=inbound, wake=bell)
    bolt = build_app(
        client=channel.client,
        signing_secret=_secret(settings.slack_signing_secret),
        inbound=inbound,
        home=home,
    )
    handler = None
    if settings.slack_mode == "http":
        from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler

        handler = AsyncSlackRequestHandler(bolt)
    return SlackParts(channel=channel, app=bolt, home=home, handler=handler)


def install(app: FastAPI, settings: Settings) -> None:
    if not enabled(settings) or settings.slack_mode != "http":
        return

    @app.post(EVENTS_PATH, include_in_schema=False)
    async def slack_events(request: Request) -> Response:
        svc: Services | None = getattr(request.app.state, "services", None)
        if svc is None or svc.slack is None or svc.slack.handler is None:
            return JSONResponse({"detail": "Slack is not connected"}, status_code=503)
        response: Response = await svc.slack.handler.handle(request)
        return response


def start(svc: Services, slack: SlackParts) -> None:
    svc.spawn_singleton("slack-home", slack.home.run_forever)
    _warn_unused(svc)
    if slack.handler is not None:
        log.info("Slack: HTTP mode, events at %s%s", svc.settings.base_url, EVENTS_PATH)
        return
    _socket_mode(svc, slack.app)


def _warn_unused(svc: Services) -> None:
    """Name the skills nobody can decide from Slack, and a default skill that is missing."""
    settings = svc.settings
    nobody = [s.name for s in svc.ctx.skills.all() if not s.approvers_for(None, "slack")]
    if nobody:
        log.warning(
            "Slack: nobody can decide items of these skills from Slack (no approvers.slack): %s",
            ", ".join(nobody),
        )
    if settings.slack_default_skill and settings.slack_default_skill not in svc.ctx.skills:
        log.warning("Slack: the default skill %r is not loaded", settings.slack_default_skill)


def _socket_mode(svc: Services, bolt: AsyncApp) -> None:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    handler = AsyncSocketModeHandler(bolt, _secret(svc.settings.slack_app_token))

    async def close() -> None:
        # Closing waits for Slack to answer the websocket close; never let that hold shutdown.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(3):  # not `wait_for`, which can lose a cancel on 3.11
                await handler.close_async()  # type: ignore[no-untyped-call]

    async def socket_mode() -> None:
        """One process at a time holds the Socket Mode connection (else Slack would hand
        each event to a random one of them); it is given up with the leadership."""
        # connect() retries by itself until Slack answers, so an outage never blocks start-up.
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            await asyncio.Event().wait()
        finally:
            await close()

    svc.spawn_singleton("slack-socket-mode", socket_mode)
    log.info("Slack: Socket Mode")
