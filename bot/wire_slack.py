"""Plugs the Slack channel (channels/slack) into the app: routes at creation, receivers in the lifespan.

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

from bot.services import Services
from bot.settings import Settings

if TYPE_CHECKING:
    from slack_bolt.app.async_app import AsyncApp

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


def install(app: FastAPI, settings: Settings) -> None:
    if not enabled(settings) or settings.slack_mode != "http":
        return

    @app.post(EVENTS_PATH, include_in_schema=False)
    async def slack_events(request: Request) -> Response:
        handler = getattr(request.app.state, "slack_handler", None)
        if handler is None:
            return JSONResponse({"detail": "Slack is not connected"}, status_code=503)
        response: Response = await handler.handle(request)
        return response


async def start(svc: Services, app: FastAPI) -> None:
    settings = svc.settings
    if not enabled(settings):
        return
    missing = problems(settings)
    if missing:
        log.error("Slack is off: %s mode needs %s", settings.slack_mode, "; ".join(missing))
        return
    from slack_sdk.web.async_client import AsyncWebClient

    from agent.policy import Access
    from bot.server import add_channel
    from channels.slack import HomeTabs, SlackChannel, SlackInbound, build_app

    token = _secret(settings.slack_bot_token)
    client = (
        AsyncWebClient(token=token, base_url=settings.slack_api_url)
        if settings.slack_api_url
        else AsyncWebClient(token=token)
    )
    add_channel(svc, SlackChannel(client=client, store=svc.store, base_url=settings.base_url))
    inbound = SlackInbound(
        inbox=svc.inbox,
        runs=svc.runs,
        store=svc.store,
        skills=svc.ctx.skills,
        access=Access(skills=svc.ctx.skills, email_senders=settings.email_allowed_senders),
        base_url=settings.base_url,
        default_skill=settings.slack_default_skill,
    )
    home = HomeTabs(client=client, inbound=inbound)
    bolt = build_app(
        client=client,
        signing_secret=_secret(settings.slack_signing_secret),
        inbound=inbound,
        home=home,
    )
    svc.extras["slack"] = bolt
    svc.extras["slack_home"] = home
    # Whatever wakes the outbox changed someone's items: their Home tab is republished too.
    wake_outbox = svc.ctx.wake_outbox

    def wake() -> None:
        wake_outbox()
        home.poke()

    svc.ctx.wake_outbox = wake
    svc.spawn_singleton("slack-home", home.run_forever)
    _warn_unused(svc)

    if settings.slack_mode == "http":
        from slack_bolt.adapter.fastapi.async_handler import AsyncSlackRequestHandler

        app.state.slack_handler = AsyncSlackRequestHandler(bolt)
        log.info("Slack: HTTP mode, events at %s%s", settings.base_url, EVENTS_PATH)
        return
    _socket_mode(svc, bolt)


def _warn_unused(svc: Services) -> None:
    """Name the skills nobody can decide from Slack, and a default skill that is missing."""
    settings = svc.settings
    nobody = [s.name for s in svc.ctx.skills.all() if not s.approvers.slack]
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
