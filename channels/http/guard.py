"""Guards that run before any route reads a byte of the body: the API token, one size and time
limit for every request body, and Slack's signature.

They are ASGI middleware rather than FastAPI dependencies because FastAPI reads and parses a
JSON body before it solves a route's dependencies, and Bolt's handler parses Slack's form body
before it checks the signature: a check inside a route comes too late to stop a large or
unauthenticated body from being read.

- `/api/*` and `/mcp` without a bearer token the server knows (its own API token, or a named
  token that is not revoked): 401 before anything is read. A known one is turned into the
  caller's principal (`pizzabot.agent.policy.principal`), which the routes find in the ASGI scope
  under `PRINCIPAL`.
- A body whose declared length is over the limit: 413 at once, without reading it; a body that
  grows over the limit while it streams in: 413 as soon as it does. Webhooks (`/hooks/`) have a
  limit of their own; every other route shares one.
- A body that takes longer than `body_timeout` seconds to arrive: 408.
- `POST /slack/events` (HTTP mode): its (limited) body is checked against `X-Slack-Signature`
  before the route sees it; an unsigned or stale request gets 401.

Every refusal is JSON `{"detail": ...}` like the API's own errors, and closes the connection,
so the rest of a refused body is never read.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from pizzabot.agent.policy.principal import Principal


class BodyRefused(HTTPException):
    """Raised from `receive` while a body streams in: FastAPI and Starlette pass an
    HTTPException raised while reading the body on unchanged, so the route's caller answers
    with its status (and `BodyLimit` answers itself when nobody else did)."""


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def refuse(
    send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A JSON error that also ends the connection (the client may still be sending)."""
    payload = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


#: Where the token gate leaves the caller's principal in the ASGI scope.
PRINCIPAL = "pizzabot.principal"

#: Finds who presents a bearer token through a channel ("api", "mcp"); None: nobody known.
Resolver = Callable[[str, str], Awaitable["Principal | None"]]


class TokenGate:
    """`prefix` answers 401 unless the request carries `Authorization: Bearer <token>` of
    someone `resolve` knows; the principal it finds goes on to the route."""

    def __init__(
        self, app: ASGIApp, *, resolve: Resolver, prefix: str = "/api/", channel: str = "api"
    ) -> None:
        self.app = app
        self._resolve = resolve
        self._prefix = prefix
        self._channel = channel

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not (
            scope["path"].startswith(self._prefix) or scope["path"] == self._prefix.rstrip("/")
        ):
            await self.app(scope, receive, send)
            return
        scheme, _, given = (_header(scope, b"authorization") or "").partition(" ")
        who = None
        if scheme.lower() == "bearer" and given.strip():
            who = await self._resolve(given.strip(), self._channel)
        if who is None:
            await refuse(
                send, 401, "missing or wrong API token", [(b"www-authenticate", b"Bearer")]
            )
            return
        scope[PRINCIPAL] = who
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    #: Path prefixes with a limit of their own (webhooks), longest match first.
    per_prefix: tuple[tuple[str, int], ...] = ()
    #: Seconds a whole body may take to arrive.
    body_timeout: float = 30.0

    def for_path(self, path: str) -> int:
        for prefix, limit in sorted(self.per_prefix, key=lambda p: -len(p[0])):
            if path.startswith(prefix):
                return limit
        return self.max_bytes


class BodyLimit:
    """Refuses a body over its size limit (413) or slower than `body_timeout` (408)."""

    def __init__(self, app: ASGIApp, *, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.for_path(scope["path"])
        declared = (_header(scope, b"content-length") or "").strip()
        if declared.isdigit() and int(declared) > limit:
            await refuse(send, 413, f"the body is larger than {limit} bytes")
            return

        started = False
        received = 0
        deadline = time.monotonic() + self.limits.body_timeout
        body_done = False

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done:
                return await receive()  # only a disconnect can come now
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    message = await receive()
            except TimeoutError:
                raise BodyRefused(
                    408, f"the body did not arrive within {self.limits.body_timeout:g} s"
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyRefused(413, f"the body is larger than {limit} bytes")
                body_done = not message.get("more_body", False)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyRefused as exc:
            if started:
                raise
            await refuse(send, exc.status_code, str(exc.detail))


class SlackSignatureGate:
    """Checks Slack's request signature over the (already limited) body before the route
    parses it, then hands the route the same bytes."""

    def __init__(self, app: ASGIApp, *, signing_secret: str, path: str) -> None:
        from slack_sdk.signature import SignatureVerifier

        self.app = app
        self._verifier = SignatureVerifier(signing_secret)
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            valid = self._verifier.is_valid(
                body,
                _header(scope, b"x-slack-request-timestamp"),
                _header(scope, b"x-slack-signature"),
            )
        except (ValueError, UnicodeDecodeError):
            valid = False
        if not valid:
            await refuse(send, 401, "missing, stale or wrong Slack signature")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
