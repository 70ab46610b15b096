"""Telegram on the app: in webhook mode, `POST /telegram/webhook` behind the check of its
secret token, and the webhook's registration with Telegram; else long polling (`polling`),
which needs no public URL.

The composition root hands in the settings' values and how a request finds the running
inbound side; nothing here reads the settings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import BackgroundTasks, FastAPI, Request, Response
from fastapi.responses import JSONResponse

from pizzabot.channels.chat.serving import Spawn, not_connected, read_object, until_taken
from pizzabot.channels.telegram.api import TelegramApi, TelegramError
from pizzabot.channels.telegram.gate import TelegramSecretGate
from pizzabot.channels.telegram.inbound import TelegramInbound
from pizzabot.channels.telegram.polling import Poller

__all__ = ["WEBHOOK_PATH", "install", "register_webhook", "start"]

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"


def install(
    app: FastAPI, *, secret: str, find: Callable[[Request], TelegramInbound | None]
) -> None:
    """The webhook's route, and its gate: an update without `secret` is refused before its
    body is read."""
    app.add_middleware(TelegramSecretGate, secret=secret, path=WEBHOOK_PATH)

    @app.post(WEBHOOK_PATH, include_in_schema=False)
    async def telegram_webhook(request: Request, background: BackgroundTasks) -> Response:
        inbound = find(request)
        if inbound is None:
            return not_connected("Telegram")
        update = await read_object(request, "an update")
        if isinstance(update, Response):
            return update
        # Answer at once and work after: Telegram sends the update again if we are slow.
        background.add_task(inbound.handle, update)
        return JSONResponse({"ok": True})


async def register_webhook(api: TelegramApi, *, url: str, secret: str) -> None:
    """Tell Telegram where updates go and with which secret, until it takes it."""
    await until_taken(
        lambda: api.call(
            "setWebhook",
            url=url,
            secret_token=secret,
            allowed_updates=["message", "callback_query"],
        ),
        what="Telegram: setWebhook",
        refused=TelegramError,
        log=log,
    )


def start(
    inbound: TelegramInbound,
    *,
    spawn: Spawn,
    webhook_url: str | None,
    secret: str,
    poll_timeout: float,
) -> None:
    """Start hearing Telegram, in one process of all (`spawn` runs a singleton): register
    the webhook at `webhook_url`, or without one, poll for updates."""
    if webhook_url is not None:
        url = webhook_url
        spawn("telegram-webhook", lambda: register_webhook(inbound.api, url=url, secret=secret))
        log.info("Telegram: webhook at %s", url)
        return
    poller = Poller(api=inbound.api, handle=inbound.handle, timeout=poll_timeout)
    spawn("telegram-polling", poller.run_forever)
    log.info("Telegram: long polling")
