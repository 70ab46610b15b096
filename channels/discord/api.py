"""Discord's HTTP API over httpx: one `request` per call, and its failures in the outbox's
terms.

The bot's own calls (posting and editing messages, registering `/pizza`) carry `Bot <token>`;
an interaction's follow-ups (`/webhooks/{application}/{interaction token}/…`) carry nothing
but that token in their path. A 429 answers with how long to wait (`retry_after`, seconds, in
the body, and `Retry-After`).
"""

from __future__ import annotations

from typing import Any

import httpx

from pizzabot.agent.channel import DeliveryError

__all__ = ["DiscordApi", "DiscordError", "delivery_error"]


class DiscordError(Exception):
    """Discord refused a call (`status`, its `code` and `message`), or could not be reached
    (`status` 0). `retry_after`: the seconds a 429 asks to wait."""

    def __init__(self, what: str, status: int, message: str, retry_after: float | None) -> None:
        super().__init__(f"{what}: Discord answered {status} {message}".strip())
        self.status = status
        self.retry_after = retry_after


class DiscordApi:
    """The application's client. `api_url` is Discord's (tests point it at a recorder)."""

    def __init__(
        self, *, token: str, application_id: str, api_url: str, timeout: float = 30.0
    ) -> None:
        self._base = api_url.rstrip("/")
        self._auth = {"Authorization": f"Bot {token}"}
        self.application_id = application_id
        self._client = httpx.AsyncClient(timeout=timeout, headers={"User-Agent": "PizzaBot"})

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        bot: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """The answer's JSON (None for 204); DiscordError when refused or unreachable.
        `bot`: the call carries the bot's token (an interaction's follow-up does not)."""
        what = f"{method} {path.split('?')[0]}"
        if not bot:
            what = f"{method} an interaction's message"  # its path holds the interaction token
        try:
            response = await self._client.request(
                method,
                self._base + path,
                json=json,
                headers=self._auth if bot else None,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.HTTPError as exc:
            raise DiscordError(what, 0, type(exc).__name__, None) from None
        if response.status_code == 204:
            return None
        try:
            data = response.json()
        except ValueError:
            data = None
        if 200 <= response.status_code < 300:
            return data
        body = data if isinstance(data, dict) else {}
        retry = body.get("retry_after")
        if not isinstance(retry, int | float):
            header = response.headers.get("retry-after")
            retry = float(header) if header and header.replace(".", "", 1).isdigit() else None
        message = f"{body.get('code', '')} {body.get('message', '')}".strip()
        raise DiscordError(what, response.status_code, message[:300], retry)

    async def aclose(self) -> None:
        await self._client.aclose()


def delivery_error(exc: DiscordError) -> DeliveryError:
    """The outbox's view of a failed call: a 429 waits as asked; another 4xx (a refused
    message, a channel the bot cannot see) is not worth retrying."""
    if exc.status == 429:
        return DeliveryError(str(exc), retry_after=exc.retry_after or 1.0)
    return DeliveryError(str(exc), permanent=400 <= exc.status < 500)
