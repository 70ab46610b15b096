"""The Bot Framework endpoint's check, before an activity's body is read: its bearer token
must verify (`pizzabot.channels.teams.auth.BotFrameworkKeys`), else 401 and the body stays unread.

What the token says (the service URL the activity must name, the channels its key is endorsed
for) goes on to the route in the ASGI scope under `CALLER`; the route checks the activity
against it once it is parsed.
"""

from __future__ import annotations

import json
import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from pizzabot.channels.teams.auth import BotFrameworkKeys, TokenRefused

__all__ = ["CALLER", "TeamsTokenGate"]

log = logging.getLogger(__name__)

#: Where the gate leaves the verified token's `Caller` in the ASGI scope.
CALLER = "pizzabot.teams.caller"


class TeamsTokenGate:
    """Refuses a request to `path` whose bearer token `keys` does not verify."""

    def __init__(self, app: ASGIApp, *, keys: BotFrameworkKeys, path: str) -> None:
        self.app = app
        self._keys = keys
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        given = [bytes(v) for k, v in scope.get("headers", []) if k.lower() == b"authorization"]
        try:
            if len(given) != 1:
                raise TokenRefused("one Authorization header is needed")
            caller = await self._keys.verify(given[0].decode("latin-1"))
        except TokenRefused as exc:
            log.info("teams: refused a request: %s", exc)
            await _refuse(send)
            return
        scope[CALLER] = caller
        await self.app(scope, receive, send)


async def _refuse(send: Send) -> None:
    payload = json.dumps({"detail": "missing or invalid Bot Framework token"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
                (b"www-authenticate", b"Bearer"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
