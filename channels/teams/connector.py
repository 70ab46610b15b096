"""The Bot Framework connector's REST API: open a person's personal chat with the bot, send an
activity to a conversation, reply in a thread, replace an activity (a card after a decision).
Every call carries the app's token.

A conversation's service URL is the one its latest verified activity named (Teams may move a
tenant); a conversation the bot has not heard from since it started is reached at the
configured one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from pizzabot.agent.channel import DeliveryError
from pizzabot.channels.teams.auth import AppToken, TokenRefused

__all__ = ["Connector", "ConnectorError", "delivery_error"]


class ConnectorError(Exception):
    def __init__(self, what: str, status: int, message: str, retry_after: float | None) -> None:
        super().__init__(f"{what}: the connector answered {status} {message}".strip())
        self.status = status
        self.retry_after = retry_after


class Connector:
    """Calls to `service_url`s with the app's `token`."""

    def __init__(
        self,
        *,
        token: AppToken,
        service_url: str,
        client: httpx.AsyncClient,
        bot_id: str = "",
        tenant: str | None = None,
    ) -> None:
        self.token = token
        self.default_service_url = service_url
        #: The app's id and its tenant, for opening a personal chat (`open_personal`).
        self.bot_id = bot_id
        self.tenant = tenant
        self._client = client
        self._heard: dict[str, str] = {}

    def heard(self, conversation: str, service_url: str) -> None:
        """Remember where a conversation is reached (from a verified activity)."""
        self._heard[conversation.partition(";")[0]] = service_url

    def service_url_of(self, conversation: str) -> str:
        return self._heard.get(conversation.partition(";")[0], self.default_service_url)

    async def call(self, method: str, service_url: str, path: str, body: Any) -> Any:
        """The answer's JSON; ConnectorError when refused or unreachable."""
        what = f"{method} {path}"
        if "/activities" in path:  # a conversation's id says nothing useful in a log
            what = f"{method} {path.split('/activities')[0].rsplit('/', 1)[0]}/…/activities"
        try:
            token = await self.token.get()
        except TokenRefused as exc:
            raise ConnectorError(what, 0, str(exc), None) from None
        url = service_url.rstrip("/") + path
        try:
            response = await self._client.request(
                method, url, json=body, headers={"Authorization": f"Bearer {token}"}
            )
        except httpx.HTTPError as exc:
            raise ConnectorError(what, 0, type(exc).__name__, None) from None
        if response.status_code == 401:
            self.token.forget()
        if response.status_code >= 300:
            header = response.headers.get("retry-after") or ""
            retry = float(header) if header.isdigit() else None
            raise ConnectorError(what, response.status_code, response.text[:200], retry)
        try:
            return response.json()
        except ValueError:
            return {}

    async def open_personal(self, service_url: str, user: str) -> str:
        """The personal chat of the bot with `user` (their Entra object id), opened if it
        was not (the connector answers the same conversation each time)."""
        body: dict[str, Any] = {
            "bot": {"id": self.bot_id},
            "isGroup": False,
            "members": [{"id": user}],
        }
        if self.tenant:
            body |= {"tenantId": self.tenant, "channelData": {"tenant": {"id": self.tenant}}}
        answer = await self.call("POST", service_url, "/v3/conversations", body)
        conversation = str(answer.get("id") or "") if isinstance(answer, dict) else ""
        if not conversation:
            raise ConnectorError("POST /v3/conversations", 502, "no conversation id", None)
        return conversation

    async def send(self, service_url: str, conversation: str, activity: dict[str, Any]) -> str:
        """Post `activity` to `conversation`; its id."""
        path = f"/v3/conversations/{quote(conversation, safe='')}/activities"
        answer = await self.call("POST", service_url, path, activity)
        return str(answer.get("id") or "") if isinstance(answer, dict) else ""

    async def reply(
        self, service_url: str, conversation: str, to: str, activity: dict[str, Any]
    ) -> str:
        """Post `activity` as a reply to activity `to` (in a channel: into its thread)."""
        path = f"/v3/conversations/{quote(conversation, safe='')}/activities/{quote(to, safe='')}"
        answer = await self.call("POST", service_url, path, {**activity, "replyToId": to})
        return str(answer.get("id") or "") if isinstance(answer, dict) else ""

    async def update(
        self, service_url: str, conversation: str, activity_id: str, activity: dict[str, Any]
    ) -> None:
        path = (
            f"/v3/conversations/{quote(conversation, safe='')}"
            f"/activities/{quote(activity_id, safe='')}"
        )
        await self.call("PUT", service_url, path, {**activity, "id": activity_id})


def delivery_error(exc: ConnectorError) -> DeliveryError:
    """The outbox's view: a 429 waits as asked; a 400, 403 or 404 (a refused card, a
    conversation the bot is not in) is not worth retrying; the rest is tried again."""
    if exc.status == 429:
        return DeliveryError(str(exc), retry_after=exc.retry_after or 1.0)
    return DeliveryError(str(exc), permanent=exc.status in (400, 403, 404))
