"""A local Bot Framework for tests: its OpenID configuration and signing keys (JWKS), the token
endpoint that gives the bot its app token, the connector the bot posts cards to, and
activities signed as the Bot Framework signs them.

`TeamsPeer` serves, on loopback:

- `GET /openid` (the OpenID configuration) and `GET /keys` (the JWKS: a test RSA key, endorsed
  for `msteams`);
- `POST /token`: the client-credentials grant, for the test app's id and secret only;
- `POST|PUT /connector/v3/conversations/{id}/activities[/{activity}]`: send, reply, update
  (recorded as `send`, `reply`, `update`), each only with the app token the token endpoint
  gave; every card is checked against Adaptive Card schema 1.5 (`adaptive_cards`).

`Signer.token` makes the `Authorization` an activity carries; `post_activity` sends one.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any
from urllib.parse import unquote

import httpx
import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.peers.adaptive_cards import card_problems
from tests.peers.recorder import Call, Recorder

APP_ID = "5b0d3c4e-0000-4000-8000-00000000b07f"
APP_SECRET = "teams-app-secret-for-the-local-peer"
APP_TOKEN = "app-token-from-the-local-token-endpoint"
ISSUER = "https://api.botframework.com"
TENANT = "72f988bf-0000-4000-8000-000000000000"
KID = "test-key-1"


class Signer:
    """A signing key, published in the peer's JWKS under `kid` (or not, for a forger)."""

    def __init__(self, kid: str = KID) -> None:
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self, endorsements: list[str]) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {**data, "kid": self.kid, "use": "sig", "endorsements": endorsements}

    def token(self, service_url: str, **over: Any) -> str:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "aud": APP_ID,
            "exp": now + 3600,
            "nbf": now - 10,
            "serviceurl": service_url,
            **over,
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})


class TeamsPeer(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.signer = Signer()
        self._ids = itertools.count(1_700_000_000_001)
        self.activities: dict[str, dict[str, Any]] = {}

    @property
    def openid_url(self) -> str:
        return f"{self.base}/openid"

    @property
    def token_url(self) -> str:
        return f"{self.base}/token"

    @property
    def service_url(self) -> str:
        return f"{self.base}/connector/"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/openid", self._openid)
        app.router.add_get("/keys", self._keys)
        app.router.add_post("/token", self._token)
        app.router.add_post("/connector/v3/conversations", self._create_conversation)
        base = "/connector/v3/conversations/{conversation}/activities"
        app.router.add_post(base, self._send)
        app.router.add_post(base + "/{activity}", self._reply)
        app.router.add_put(base + "/{activity}", self._update)

    def problems(self, call: Call) -> list[str]:
        out = []
        for attachment in call.args.get("attachments") or []:
            out += card_problems(attachment.get("content"))
        return out

    async def _openid(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": ISSUER,
                "jwks_uri": f"{self.base}/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    async def _keys(self, request: web.Request) -> web.Response:
        self.record(Call("keys", {}, None, 200))
        return web.json_response({"keys": [self.signer.jwk(["msteams", "emulator"])]})

    async def _token(self, request: web.Request) -> web.Response:
        form = dict(await request.post())
        ok = form.get("client_id") == APP_ID and form.get("client_secret") == APP_SECRET
        ok = ok and form.get("grant_type") == "client_credentials"
        ok = ok and form.get("scope") == "https://api.botframework.com/.default"
        self.record(Call("token", {k: str(v) for k, v in form.items()}, None, 200 if ok else 401))
        if not ok:
            return web.json_response({"error": "invalid_client"}, status=401)
        return web.json_response(
            {"token_type": "Bearer", "expires_in": 3600, "access_token": APP_TOKEN}
        )

    async def _connector(self, request: web.Request, method: str) -> web.Response:
        body = await request.json()
        auth = request.headers.get("Authorization")
        conversation = unquote(request.match_info["conversation"])
        activity = unquote(request.match_info.get("activity", ""))
        args = {**body, "_conversation": conversation, "_activity": activity}
        failure = self.failure_for(method)
        if failure is not None:
            headers = {"Retry-After": str(int(failure.retry_after))} if failure.retry_after else {}
            self.record(Call(method, args, auth, failure.status))
            return web.json_response(
                {"error": {"code": "Throttled"}}, status=failure.status, headers=headers
            )
        if auth != f"Bearer {APP_TOKEN}":
            self.record(Call(method, args, auth, 401))
            return web.json_response({"message": "Authorization has been denied"}, status=401)
        new = activity if method == "update" else str(next(self._ids))
        self.activities[new] = {**body, "id": new, "conversation": {"id": conversation}}
        answer = {"id": new}
        self.record(Call(method, args, auth, 200, answer))
        return web.json_response(answer)

    async def _create_conversation(self, request: web.Request) -> web.Response:
        """A personal chat with the one member named (the same one each time, as Teams
        answers); refused when it names no member or more than one, or claims a group."""
        body = await request.json()
        auth = request.headers.get("Authorization")
        members = body.get("members") or []
        ok = auth == f"Bearer {APP_TOKEN}" and len(members) == 1 and not body.get("isGroup")
        ok = ok and body.get("bot", {}).get("id") == APP_ID and bool(members[0].get("id"))
        if not ok:
            self.record(Call("create_conversation", body, auth, 400))
            return web.json_response({"error": {"code": "BadArgument"}}, status=400)
        answer = {"id": f"a:personal-{members[0]['id']}"}
        self.record(Call("create_conversation", body, auth, 200, answer))
        return web.json_response(answer)

    async def _send(self, request: web.Request) -> web.Response:
        return await self._connector(request, "send")

    async def _reply(self, request: web.Request) -> web.Response:
        return await self._connector(request, "reply")

    async def _update(self, request: web.Request) -> web.Response:
        return await self._connector(request, "update")


# --- what the Bot Framework sends the bot ---------------------------------------------------

_ids = itertools.count(1)


def activity(
    *,
    service_url: str,
    user: str,
    conversation: str,
    conversation_type: str = "channel",
    **fields: Any,
) -> dict[str, Any]:
    return {
        "id": f"act-{next(_ids)}",
        "channelId": "msteams",
        "serviceUrl": service_url,
        "timestamp": "2026-12-02T10:00:00.000Z",
        "from": {"id": f"29:{user}", "aadObjectId": user, "name": "Person"},
        "recipient": {"id": f"28:{APP_ID}", "name": "Pizza Bot"},
        "conversation": {
            "id": conversation,
            "conversationType": conversation_type,
            "tenantId": TENANT,
        },
        "channelData": {"tenant": {"id": TENANT}},
        **fields,
    }


def action(
    *, service_url: str, user: str, conversation: str, verb: str, data: dict[str, Any]
) -> dict[str, Any]:
    """An `Action.Execute` (an `adaptiveCard/action` invoke) with its data."""
    value = {"action": {"type": "Action.Execute", "verb": verb, "data": data}, "trigger": "manual"}
    return activity(
        service_url=service_url,
        user=user,
        conversation=conversation,
        type="invoke",
        name="adaptiveCard/action",
        value=value,
    )


def task(
    *, service_url: str, user: str, conversation: str, name: str, data: dict[str, Any]
) -> dict[str, Any]:
    """A dialog's `task/fetch` or `task/submit` invoke."""
    return activity(
        service_url=service_url,
        user=user,
        conversation=conversation,
        type="invoke",
        name=name,
        value={"data": data, "context": {"theme": "default"}},
    )


def message(
    *, service_url: str, user: str, conversation: str, text: str, conversation_type: str = "channel"
) -> dict[str, Any]:
    return activity(
        service_url=service_url,
        user=user,
        conversation=conversation,
        conversation_type=conversation_type,
        type="message",
        text=text,
        textFormat="plain",
    )


def card_of(call: Call) -> dict[str, Any]:
    content: dict[str, Any] = call.args["attachments"][0]["content"]
    return content


def find_action(card: dict[str, Any], title: str) -> dict[str, Any]:
    """The action titled `title` on `card` (in a ShowCard too)."""
    for act in card.get("actions") or []:
        if act.get("title") == title and act.get("type") != "Action.ShowCard":
            return dict(act)
        inner = act.get("card") or {}
        for sub in inner.get("actions") or []:
            if sub.get("title") == title:
                return dict(sub)
    raise AssertionError(f"no action {title!r}")


async def post_activity(
    url: str, body: dict[str, Any] | bytes, *, token: str | None
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(url, content=content, headers=headers)
