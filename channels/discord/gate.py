"""The Discord interactions endpoint's check, before its body is parsed: every interaction is
signed with the application's Ed25519 key over `X-Signature-Timestamp` followed by the raw
body (`X-Signature-Ed25519`, hex), and a request whose signature does not verify against the
app's public key is refused with 401. Discord itself sends such forged requests to check that
an endpoint refuses them.

ASGI middleware: it reads the (already size-limited) body, verifies it, and hands the route the
same bytes. A timestamp older than `tolerance` seconds (or as far ahead) is refused too, so a
recorded interaction cannot be replayed later.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DiscordSignatureGate", "verify"]


def _header(scope: Scope, name: bytes) -> str | None:
    found = [bytes(v) for k, v in scope.get("headers", []) if k.lower() == name]
    return found[0].decode("latin-1") if len(found) == 1 else None


def verify(
    key: Ed25519PublicKey,
    *,
    body: bytes,
    signature: str | None,
    timestamp: str | None,
    now: float,
    tolerance: float,
) -> bool:
    """Whether `signature` (hex) is the app's over `timestamp` + `body`, made within
    `tolerance` seconds of `now`."""
    if not signature or not timestamp or not timestamp.isascii() or not timestamp.isdigit():
        return False
    if abs(now - int(timestamp)) > tolerance:
        return False
    try:
        key.verify(bytes.fromhex(signature), timestamp.encode() + body)
    except (ValueError, InvalidSignature):
        return False
    return True


class DiscordSignatureGate:
    """Verifies requests to `path` with the app's public key (hex) before the route."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        public_key: str,
        path: str,
        tolerance: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self._key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key))
        self._path = path
        self._tolerance = tolerance
        self._clock = clock

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
        valid = verify(
            self._key,
            body=body,
            signature=_header(scope, b"x-signature-ed25519"),
            timestamp=_header(scope, b"x-signature-timestamp"),
            now=self._clock(),
            tolerance=self._tolerance,
        )
        if not valid:
            await _refuse(send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _refuse(send: Send) -> None:
    payload = json.dumps({"detail": "invalid request signature"}).encode()
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
