"""The Telegram webhook's check, before its body is read: the secret token the bot gave
`setWebhook` comes back in `X-Telegram-Bot-Api-Secret-Token` on every update, and a request
without it (or with another) is refused with 401 and its body left unread.

ASGI middleware, like the API's token gate: a check inside the route would come after
FastAPI read and parsed the body.
"""

from __future__ import annotations

import hmac
import json

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SECRET_HEADER", "TelegramSecretGate"]

SECRET_HEADER = b"x-telegram-bot-api-secret-token"


class TelegramSecretGate:
    """Refuses a request to `path` whose secret token header is not `secret`."""

    def __init__(self, app: ASGIApp, *, secret: str, path: str) -> None:
        self.app = app
        self._secret = secret.encode()
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        given = [bytes(v) for k, v in scope.get("headers", []) if k.lower() == SECRET_HEADER]
        if len(given) == 1 and hmac.compare_digest(given[0], self._secret):
            await self.app(scope, receive, send)
            return
        payload = json.dumps({"detail": "missing or wrong Telegram secret token"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})
