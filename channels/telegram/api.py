"""The Telegram Bot API over httpx: one `call` per method, and its failures in the outbox's
terms.

Every method is `POST {api_url}/bot{token}/{method}` with a JSON body, answered with
`{"ok": true, "result": ...}` or `{"ok": false, "error_code": ..., "description": ...,
"parameters": {"retry_after": ...}}`. The token is part of the URL, so no error text made
here names the URL (the outbox redacts secrets as well).
"""

from __future__ import annotations

from typing import Any

import httpx

from pizzabot.agent.channel import DeliveryError

__all__ = ["TelegramApi", "TelegramError", "delivery_error"]

#: What Telegram answers an edit that changes nothing: the copy already shows the item.
NOT_MODIFIED = "message is not modified"


class TelegramError(Exception):
    """Telegram refused a call (`status`, its `description`), or could not be reached
    (`status` 0). `retry_after`: the seconds a 429 asks to wait."""

    def __init__(self, method: str, status: int, description: str, retry_after: float | None):
        super().__init__(f"{method}: Telegram answered {status} {description}".strip())
        self.method = method
        self.status = status
        self.description = description
        self.retry_after = retry_after


class TelegramApi:
    """A bot's client. `api_url` is Telegram's (tests point it at a local recorder)."""

    def __init__(self, *, token: str, api_url: str, timeout: float = 30.0) -> None:
        self._base = f"{api_url.rstrip('/')}/bot{token}/"
        self._client = httpx.AsyncClient(timeout=timeout)
        #: The bot's own user id: the digits before the token's colon.
        self.bot_id = token.partition(":")[0]

    async def call(self, method: str, *, http_timeout: float | None = None, **params: Any) -> Any:
        """The method's `result`; TelegramError when Telegram refuses or cannot be reached.
        `http_timeout` bounds this request (the client's default otherwise)."""
        body = {k: v for k, v in params.items() if v is not None}
        try:
            response = await self._client.post(
                self._base + method,
                json=body,
                timeout=http_timeout if http_timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.HTTPError as exc:
            raise TelegramError(method, 0, type(exc).__name__, None) from None
        try:
            data = response.json()
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if response.status_code == 200 and data.get("ok") is True:
            return data.get("result")
        parameters = data.get("parameters")
        retry = parameters.get("retry_after") if isinstance(parameters, dict) else None
        raise TelegramError(
            method,
            response.status_code,
            str(data.get("description") or "")[:300],
            float(retry) if isinstance(retry, int | float) else None,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def delivery_error(exc: TelegramError) -> DeliveryError:
    """The outbox's view of a failed call: a 429 waits as asked; a 400 or 403 (a refused
    message, a chat the bot is not in or was blocked from) is not worth retrying."""
    if exc.status == 429:
        return DeliveryError(str(exc), retry_after=exc.retry_after or 1.0)
    return DeliveryError(str(exc), permanent=exc.status in (400, 403, 404))
