"""A local Web Push service for tests: RFC 8030 on loopback, strict about what it accepts.

It plays both sides a real push service joins: it hands out subscriptions (an endpoint
here, and a browser's P-256 key pair and auth secret, kept to decrypt with), and it takes
pushes for them, as a push service would, only with:

- a VAPID `Authorization: vapid t=JWT, k=KEY` (RFC 8292): an ES256 JWT verified with `k`,
  whose `aud` is this service's origin, `exp` in the future and at most 24 hours away, and
  `sub` a `mailto:` or `https:` contact; and `k` must be the key the subscription was made for;
- `Content-Encoding: aes128gcm` and a `TTL`, the body decrypted with the subscription's
  private key and auth secret (RFC 8291, `http_ece`).

Every push is recorded with what it decrypted to. A subscription can be told to answer
`410 Gone`, as a push service does for a browser that unsubscribed.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import http_ece
from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Push:
    """One push the service took (or refused: `status`, `problem`)."""

    sub: str
    status: int
    headers: dict[str, str]
    plaintext: bytes = b""
    problem: str = ""

    def json(self) -> Any:
        return json.loads(self.plaintext)


@dataclass
class _Sub:
    private: ec.EllipticCurvePrivateKey
    auth: bytes
    #: The VAPID key the browser subscribed with (its `applicationServerKey`).
    server_key: str
    gone: bool = False


@dataclass
class PushService:
    """`async with PushService() as ps:`; `ps.subscribe(server_key)` gives a subscription's
    JSON as `PushSubscription.toJSON()` would, for the browser's stand-in to hand the page."""

    pushes: list[Push] = field(default_factory=list)
    port: int = 0
    _subs: dict[str, _Sub] = field(default_factory=dict)
    _runner: web.AppRunner | None = None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> PushService:
        app = web.Application()
        app.router.add_post("/push/{sub}", self._take)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def subscribe(self, server_key: str) -> dict[str, Any]:
        sub_id = secrets.token_urlsafe(12)
        private = ec.generate_private_key(ec.SECP256R1())
        self._subs[sub_id] = _Sub(private, secrets.token_bytes(16), server_key)
        public = private.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return {
            "endpoint": f"{self.origin}/push/{sub_id}",
            "expirationTime": None,
            "keys": {"p256dh": b64url(public), "auth": b64url(self._subs[sub_id].auth)},
        }

    def gone(self, endpoint: str) -> None:
        """From now on, pushes to this subscription are answered `410 Gone`."""
        self._subs[endpoint.rsplit("/", 1)[1]].gone = True

    def taken(self) -> list[Push]:
        return [p for p in self.pushes if p.status == 201]

    async def _take(self, request: web.Request) -> web.Response:
        sub_id = request.match_info["sub"]
        headers = {k.lower(): v for k, v in request.headers.items()}
        body = await request.read()
        sub = self._subs.get(sub_id)
        if sub is None or sub.gone:
            self.pushes.append(Push(sub_id, 410, headers, problem="gone"))
            return web.Response(status=410, text="subscription gone")
        problem = self._vapid_problem(headers, sub) or self._encoding_problem(headers)
        if problem:
            status = 403 if problem.startswith("vapid") else 400
            self.pushes.append(Push(sub_id, status, headers, problem=problem))
            return web.Response(status=status, text=problem)
        try:
            plain = http_ece.decrypt(
                body, private_key=sub.private, auth_secret=sub.auth, version="aes128gcm"
            )
        except Exception as exc:
            self.pushes.append(Push(sub_id, 400, headers, problem=f"cannot decrypt: {exc}"))
            return web.Response(status=400, text="cannot decrypt")
        self.pushes.append(Push(sub_id, 201, headers, plaintext=plain))
        return web.Response(status=201, headers={"Location": f"{self.origin}/m/{len(self.pushes)}"})

    def _vapid_problem(self, headers: dict[str, str], sub: _Sub) -> str:
        scheme, _, params = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "vapid":
            return "vapid: no vapid authorization"
        parts = dict(p.strip().split("=", 1) for p in params.split(",") if "=" in p)
        token, key = parts.get("t", ""), parts.get("k", "")
        if key != sub.server_key:
            return "vapid: k is not the key the subscription was made for"
        try:
            head_b64, claims_b64, sig_b64 = token.split(".")
            head, claims = json.loads(unb64url(head_b64)), json.loads(unb64url(claims_b64))
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
            sig = unb64url(sig_b64)
            der = encode_dss_signature(int.from_bytes(sig[:32]), int.from_bytes(sig[32:]))
            public.verify(der, f"{head_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
        except (ValueError, InvalidSignature) as exc:
            return f"vapid: the JWT does not hold ({exc!r})"
        now = time.time()
        if head.get("alg") != "ES256":
            return "vapid: alg is not ES256"
        if claims.get("aud") != self.origin:
            return f"vapid: aud {claims.get('aud')!r} is not {self.origin}"
        if not now < float(claims.get("exp", 0)) <= now + 24 * 3600:
            return "vapid: exp is not within 24 hours"
        if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
            return "vapid: sub is not a contact"
        return ""

    @staticmethod
    def _encoding_problem(headers: dict[str, str]) -> str:
        if headers.get("content-encoding") != "aes128gcm":
            return "content-encoding is not aes128gcm"
        if not headers.get("ttl", "").isdigit():
            return "no TTL"
        return ""
