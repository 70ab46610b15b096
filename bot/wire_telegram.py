"""Plugs Telegram (channels/telegram) into the app: the channel items are delivered on, what
answers updates, and how updates arrive.

Telegram is on when a bot token is set. Long polling (the default) needs no public URL: one
process asks Telegram for updates. Webhook mode serves `POST /telegram/webhook` on this app,
checks its secret token before the body is read, and registers the webhook with Telegram at
start. Nothing of `channels.telegram` is imported unless Telegram is on.
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
    from channels.telegram import TelegramChannel

log = logging.getLogger("pizzabot.telegram")

NAME = "telegram"
WEBHOOK_PATH = "/telegram/webhook"


def _secret(value: object) -> str:
    get = getattr(value, "get_secret_value", None)
    return str(get()) if callable(get) else ""


def enabled(settings: Settings) -> bool:
    return bool(_secret(settings.telegram_bot_token))


def problems(settings: Settings) -> list[str]:
    """What is missing for the chosen mode (empty when Telegram can start)."""
    missing: list[str] = []
    if settings.telegram_mode == "webhook":
        if not _secret(settings.telegram_webhook_secret):
            missing.append("PIZZABOT_TELEGRAM_WEBHOOK_SECRET (every update is checked with it)")
        if not settings.public_url:
            missing.append("PIZZABOT_PUBLIC_URL (the https address Telegram posts updates to)")
    return missing


def reaches(settings: Settings) -> bool:
    return enabled(settings) and not problems(settings)


def outlet(settings: Settings, *, store: SqlStore) -> TelegramChannel | None:
    """The Telegram channel, when the settings turn it on and hold what its mode needs."""
    if not enabled(settings):
        return None
    missing = problems(settings)
    if missing:
        log.error("Telegram is off: %s mode needs %s", settings.telegram_mode, "; ".join(missing))
        return None
    from channels.telegram import TelegramApi, TelegramChannel

    api = TelegramApi(token=_secret(settings.telegram_bot_token), api_url=settings.telegram_api_url)
    return TelegramChannel(api=api, store=store, base_url=settings.base_url)


def build(
    settings: Settings, *, channel: TelegramChannel, core: Core, store: SqlStore, access: Access
) -> ChatParts:
    from channels.chat import ChatDesk
    from channels.telegram import TelegramInbound

    desk = ChatDesk(
        channel=NAME,
        platform="Telegram",
        inbox=core.inbox,
        runs=core.runs,
        store=store,
        skills=core.ctx.skills,
        access=access,
        base_url=settings.base_url,
        default_skill=settings.telegram_default_skill,
    )
    inbound = TelegramInbound(desk=desk, api=channel.api)
    return ChatParts(channel=channel, inbound=inbound, start=start)


def start(svc: Services) -> None:
    parts = svc.chats[NAME]
    settings = svc.settings
    if settings.telegram_mode == "webhook":
        svc.spawn_singleton("telegram-webhook", lambda: _register(svc, parts))
        log.info("Telegram: webhook at %s%s", settings.base_url, WEBHOOK_PATH)
        return
    from channels.telegram import Poller

    poller = Poller(
        api=parts.inbound.api, handle=parts.inbound.handle, timeout=settings.telegram_poll_timeout
    )
    svc.spawn_singleton("telegram-polling", poller.run_forever)
    log.info("Telegram: long polling")


async def _register(svc: Services, parts: ChatParts) -> None:
    """Tell Telegram where updates go and with which secret, until it takes it."""
    from channels.telegram import TelegramError

    settings = svc.settings
    wait = 1.0
    while True:
        try:
            await parts.inbound.api.call(
                "setWebhook",
                url=settings.base_url + WEBHOOK_PATH,
                secret_token=_secret(settings.telegram_webhook_secret),
                allowed_updates=["message", "callback_query"],
            )
            return
        except TelegramError as exc:
            log.warning("Telegram: setWebhook failed (%s); again in %.0f s", exc, wait)
            await asyncio.sleep(wait)
            wait = min(wait * 2, 300.0)


def install(app: FastAPI, settings: Settings) -> None:
    if not enabled(settings) or settings.telegram_mode != "webhook":
        return

    @app.post(WEBHOOK_PATH, include_in_schema=False)
    async def telegram_webhook(request: Request, background: BackgroundTasks) -> Response:
        svc: Services | None = getattr(request.app.state, "services", None)
        parts = svc.chats.get(NAME) if svc is not None else None
        if parts is None:
            return JSONResponse({"detail": "Telegram is not connected"}, status_code=503)
        try:
            update: Any = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"detail": "the body is not JSON"}, status_code=400)
        if not isinstance(update, dict):
            return JSONResponse({"detail": "an update is a JSON object"}, status_code=400)
        # Answer at once and work after: Telegram sends the update again if we are slow.
        background.add_task(parts.inbound.handle, update)
        return JSONResponse({"ok": True})


def gate(app: FastAPI, settings: Settings) -> None:
    """The webhook's secret token is checked before its body is read."""
    if not reaches(settings) or settings.telegram_mode != "webhook":
        return
    from channels.telegram import TelegramSecretGate

    app.add_middleware(
        TelegramSecretGate, secret=_secret(settings.telegram_webhook_secret), path=WEBHOOK_PATH
    )
