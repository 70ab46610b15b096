"""A local Slack peer for tests: a Web API recorder, a Socket Mode server, and signed requests.

`SlackApi` is a small aiohttp server on loopback that answers the Web API methods Pizza Bot
calls (`auth.test`, `chat.postMessage` with a fresh `ts`, `chat.update`, `views.open`,
`chat.postEphemeral`, `conversations.open`, `apps.connections.open`, …) and records every call.
It can be told to fail the next N calls (429 with Retry-After, or 500), as Slack does when it
rate-limits or is down. `response_url`s pointing at `/respond/...` are recorded too.

`apps.connections.open` hands out `ws://127.0.0.1:PORT/socket`, a Socket Mode endpoint the
test drives: `push(envelope)` sends an envelope to the connected app and returns its ack.

The rest builds what Slack sends an app, in the shapes Slack documents: `block_actions` and
`view_submission` payloads, slash commands, events, signed with the signing secret
(`X-Slack-Signature`, `X-Slack-Request-Timestamp`).

`payload_problems` checks what the app sent against Slack's documented limits, the way Slack
would answer `invalid_blocks` / `invalid_arguments`: what `slack_sdk.models` validates, plus
what it does not (block_id length and uniqueness per view or message, action_id uniqueness per
block, a number_input's initial value, private_metadata's size). `SlackApi.check()` applies it
to every call recorded so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
from aiohttp import WSMsgType, web
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View
from slack_sdk.signature import SignatureVerifier

from pizzabot.agent.argforms import form_fields
from pizzabot.channels.slack.blocks import field_block
from tests.waiting import eventually

BOT_USER = "UBOT"
BOT_ID = "BBOT"
TEAM = "T0PIZZA"
APP_ID = "A0PIZZA"

T = TypeVar("T")


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    token: str | None
    status: int
    answer: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Failure:
    status: int
    retry_after: float | None
    methods: frozenset[str] | None
    error: str | None


class SlackApi:
    """The recorder. Use as `async with SlackApi() as slack:`; `slack.url` is the Web API base
    (with the trailing slash slack_sdk wants).

    It serves from its own thread and event loop, so it keeps answering while the test's loop
    is blocked (the server process is stopped with a blocking wait, and a Socket Mode client
    closing its websocket waits for our reply).
    """

    def __init__(self, *, workspace_url: str = "https://pizza.slack.test/") -> None:
        self.calls: list[Call] = []
        #: What `auth.test` says the workspace's address is (some clients call it next).
        self.workspace_url = workspace_url
        #: A workspace to read from (`users.list`, `conversations.list`, `conversations.info`,
        #: `conversations.history`): user and channel objects in Slack's shapes, and each
        #: channel's messages, newest first as Slack returns them.
        self.users: list[dict[str, Any]] = []
        self.channels: list[dict[str, Any]] = []
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.port = 0
        self._lock = threading.Lock()
        self._failures: list[_Failure] = []
        self._ts = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._socket: web.WebSocketResponse | None = None
        self._socket_ready: asyncio.Event | None = None
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def socket_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/socket"

    def response_url(self, name: str = "r") -> str:
        return f"http://127.0.0.1:{self.port}/respond/{name}"

    async def _there(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the recorder's loop and wait for it from the caller's."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def __aenter__(self) -> SlackApi:
        self._thread.start()
        await self._there(self._start())
        return self

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/respond/{name}", self._respond)
        app.router.add_get("/socket", self._ws)
        self._socket_ready = asyncio.Event()
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop answering (Slack is gone); idempotent."""
        if not self._thread.is_alive():
            return
        await self._there(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join, 10)
        self._loop.close()

    async def _stop(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._socket.close(), 2)
        if self._runner is not None:
            await self._runner.cleanup()

    # -- telling it to fail --------------------------------------------------------------

    def fail_next(
        self,
        n: int,
        *,
        status: int = 500,
        retry_after: float | None = None,
        methods: set[str] | None = None,
        error: str | None = None,
    ) -> None:
        """Answer the next `n` calls (of `methods`, or any but auth.test) with `status` and
        Slack's error code `error` (by default what Slack says for that status)."""
        only = frozenset(methods) if methods else None
        with self._lock:
            for _ in range(n):
                self._failures.append(_Failure(status, retry_after, only, error))

    def _failure_for(self, method: str) -> _Failure | None:
        with self._lock:
            for i, failure in enumerate(self._failures):
                if (failure.methods is None and method != "auth.test") or (
                    failure.methods is not None and method in failure.methods
                ):
                    return self._failures.pop(i)
        return None

    # -- reading what was called ---------------------------------------------------------

    def calls_to(self, method: str, **match: Any) -> list[Call]:
        with self._lock:
            calls = list(self.calls)
        return [
            c
            for c in calls
            if c.method == method
            and c.status == 200
            and all(c.args.get(k) == v for k, v in match.items())
        ]

    def check(self) -> None:
        """Fail with every payload so far that Slack would refuse (see `payload_problems`)."""
        with self._lock:
            calls = list(self.calls)
        found = [f"{c.method}: {p}" for c in calls for p in payload_problems(c.method, c.args)]
        assert not found, "Slack would refuse:\n" + "\n".join(found)

    async def wait_for(
        self,
        method: str,
        predicate: Callable[[Call], bool] = lambda c: True,
        *,
        count: int = 1,
        timeout: float = 20.0,
    ) -> list[Call]:
        """The successful calls of `method` matching `predicate`, once there are `count`."""

        def found() -> list[Call] | None:
            calls = [c for c in self.calls_to(method) if predicate(c)]
            return calls if len(calls) >= count else None

        return await eventually(
            found,
            what=f"{count} x {method}",
            timeout=timeout,
            interval=0.02,
            context=lambda: f"calls: {[(c.method, c.status) for c in self.calls]}",
        )

    # -- the Web API ---------------------------------------------------------------------

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                body = await request.json()
                if isinstance(body, dict):
                    args.update(body)
            else:
                args.update(dict(await request.post()))
        for key in ("blocks", "view"):  # form posts carry these as JSON text
            if isinstance(args.get(key), str):
                with contextlib.suppress(ValueError):
                    args[key] = json.loads(args[key])
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") or args.get("token")
        failure = self._failure_for(method)
        if failure is not None:
            self._record(Call(method, args, token, failure.status))
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = str(int(failure.retry_after))
            error = failure.error or ("ratelimited" if failure.status == 429 else "internal_error")
            return web.json_response(
                {"ok": False, "error": error}, status=failure.status, headers=headers
            )
        answer = self._answer(method, args)
        self._record(Call(method, args, token, 200, answer))
        return web.json_response(answer)

    def _answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        ok: dict[str, Any] = {"ok": True}
        match method:
            case "auth.test":
                return {
                    **ok,
                    "url": self.workspace_url,
                    "team": "Pizza",
                    "user": "pizzabot",
                    "team_id": TEAM,
                    "user_id": BOT_USER,
                    "bot_id": BOT_ID,
                    "is_enterprise_install": False,
                }
            case "chat.postMessage":
                ts = f"{1_700_000_000 + next(self._ts)}.000100"
                channel = str(args.get("channel"))
                return {
                    **ok,
                    "channel": channel,
                    "ts": ts,
                    "message": {"type": "message", "text": args.get("text"), "ts": ts},
                }
            case "chat.update":
                return {**ok, "channel": args.get("channel"), "ts": args.get("ts")}
            case "chat.postEphemeral":
                return {**ok, "message_ts": f"{1_700_000_000 + next(self._ts)}.000200"}
            case "views.open" | "views.publish":
                view = args.get("view") or {}
                return {**ok, "view": {**view, "id": "V" + uuid.uuid4().hex[:8]}}
            case "conversations.open":
                users = str(args.get("users") or "")
                return {**ok, "channel": {"id": "D" + users.split(",")[0].lstrip("UW")}}
            case "apps.connections.open":
                return {**ok, "url": self.socket_url}
        return self._read(method, args) or ok

    def _read(self, method: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """The workspace's reading methods, one page each (no `next_cursor`)."""
        done = {"ok": True, "response_metadata": {"next_cursor": ""}}
        match method:
            case "users.list":
                return {**done, "members": self.users}
            case "conversations.list" | "users.conversations":
                return {**done, "channels": self.channels}
            case "conversations.info":
                found = [c for c in self.channels if c["id"] == args.get("channel")]
                if not found:
                    return {"ok": False, "error": "channel_not_found"}
                return {"ok": True, "channel": found[0]}
            case "conversations.history":
                if str(args.get("channel")) not in self.history:
                    return {"ok": False, "error": "channel_not_found"}
                messages = self.history[str(args.get("channel"))]
                return {**done, "messages": messages, "has_more": False}
        return None

    async def _respond(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        self._record(Call("response_url", dict(body), None, 200))
        return web.Response(text="ok")

    # -- Socket Mode ---------------------------------------------------------------------

    async def _ws(self, request: web.Request) -> web.WebSocketResponse:
        assert self._socket_ready is not None
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._socket = ws
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": 1,
                "debug_info": {"host": "local-test", "approximate_connection_time": 3600},
                "connection_info": {"app_id": APP_ID},
            }
        )
        self._socket_ready.set()
        self._record(Call("socket.connected", {}, None, 200))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            future = self._acks.get(str(data.get("envelope_id")))
            if future is not None and not future.done():
                future.set_result(data)
        self._socket_ready.clear()
        return ws

    async def push(self, envelope: dict[str, Any], *, timeout: float = 10.0) -> dict[str, Any]:
        """Send a Socket Mode envelope to the connected app; return its acknowledgement."""
        return await self._there(self._push(envelope, timeout))

    async def _push(self, envelope: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self._socket_ready is not None
        await asyncio.wait_for(self._socket_ready.wait(), 30)
        assert self._socket is not None
        envelope_id = str(envelope["envelope_id"])
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = future
        await self._socket.send_json(envelope)
        return await asyncio.wait_for(future, timeout)


# --- what Slack accepts -------------------------------------------------------------------

_MESSAGE_BLOCKS = 50
_VIEW_BLOCKS = 100
_ID_MAX = 255
_TEXT_MAX = 40_000  # a message's top-level text: Slack truncates after this
_METADATA_MAX = 3000
_TEXT_INPUT_MAX = 3000
_OPTIONS_MAX = 100
_OPTION_VALUE_MAX = 150
_OPTION_TEXT_MAX = 75


def payload_problems(method: str, args: dict[str, Any]) -> list[str]:
    """Why Slack would refuse this Web API call's blocks or view (empty when it would not)."""
    problems: list[str] = []
    text = args.get("text")
    if isinstance(text, str) and len(text) > _TEXT_MAX:
        problems.append(f"top-level text of {len(text)} characters")
    if method in {"chat.postMessage", "chat.update", "chat.postEphemeral"}:
        if not text and not args.get("blocks"):
            problems.append("neither text nor blocks")
        message_blocks = args.get("blocks")
        if message_blocks is not None:
            problems += _blocks_problems(message_blocks, limit=_MESSAGE_BLOCKS)
    view = args.get("view")
    if isinstance(view, dict):
        try:
            View(**view).validate_json()
        except (SlackObjectFormationError, TypeError) as exc:
            problems.append(f"view: {exc}")
        problems += _blocks_problems(view.get("blocks") or [], limit=_VIEW_BLOCKS)
        for key in ("callback_id", "external_id"):
            if len(str(view.get(key) or "")) > _ID_MAX:
                problems.append(f"view {key} over {_ID_MAX} characters")
        if len(str(view.get("private_metadata") or "")) > _METADATA_MAX:
            problems.append(f"private_metadata over {_METADATA_MAX} characters")
    return problems


def _blocks_problems(blocks: Any, *, limit: int) -> list[str]:
    if not isinstance(blocks, list):
        return [f"blocks is {type(blocks).__name__}, not a list"]
    problems: list[str] = []
    if len(blocks) > limit:
        problems.append(f"{len(blocks)} blocks (at most {limit})")
    block_ids: set[str] = set()
    for n, block in enumerate(blocks):
        where = f"block {n} ({block.get('type')})" if isinstance(block, dict) else f"block {n}"
        parsed = Block.parse(block) if isinstance(block, dict) else None
        if parsed is None:
            problems.append(f"{where}: not a block Slack knows")
            continue
        try:
            parsed.validate_json()
        except SlackObjectFormationError as exc:
            problems.append(f"{where}: {exc}")
        block_id = block.get("block_id")
        if block_id is not None:
            if not 0 < len(str(block_id)) <= _ID_MAX:
                problems.append(f"{where}: block_id of {len(str(block_id))} characters")
            if block_id in block_ids:
                problems.append(f"{where}: block_id {str(block_id)[:60]!r} used twice")
            block_ids.add(block_id)
        elements = list(block.get("elements") or [])
        if isinstance(block.get("element"), dict):
            elements.append(block["element"])
        if isinstance(block.get("accessory"), dict):
            elements.append(block["accessory"])
        action_ids: set[str] = set()
        for element in elements:
            if not isinstance(element, dict) or "action_id" not in element:
                continue
            action_id = str(element["action_id"])
            if not 0 < len(action_id) <= _ID_MAX:
                problems.append(f"{where}: action_id of {len(action_id)} characters")
            if action_id in action_ids:
                problems.append(f"{where}: action_id {action_id[:60]!r} used twice")
            action_ids.add(action_id)
            problems += [f"{where}: {p}" for p in _element_problems(element)]
    return problems


def _element_problems(element: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    kind = element.get("type")
    initial = element.get("initial_value")
    if kind == "number_input" and initial is not None:
        try:
            number = float(str(initial))
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            problems.append(f"number_input initial_value {str(initial)[:40]!r} is no number")
        elif not element.get("is_decimal_allowed") and not str(initial).lstrip("-").isdigit():
            problems.append(f"integer number_input initial_value {initial!r}")
        low, high = element.get("min_value"), element.get("max_value")
        if (low is not None and number < float(low)) or (high is not None and number > float(high)):
            problems.append(f"number_input initial_value {initial!r} outside its range")
    if (
        kind == "plain_text_input"
        and isinstance(initial, str)
        and len(initial) > int(element.get("max_length") or _TEXT_INPUT_MAX)
    ):
        problems.append(f"plain_text_input initial_value of {len(initial)} characters")
    options = element.get("options")
    if isinstance(options, list):
        if not 0 < len(options) <= _OPTIONS_MAX:
            problems.append(f"{len(options)} options")
        values = [str(o.get("value")) for o in options if isinstance(o, dict)]
        if len(set(values)) != len(values):
            problems.append("an option value used twice")
        for option in options:
            if len(str(option.get("value") or "")) > _OPTION_VALUE_MAX:
                problems.append(f"option value over {_OPTION_VALUE_MAX} characters")
            if len(str((option.get("text") or {}).get("text") or "")) > _OPTION_TEXT_MAX:
                problems.append(f"option text over {_OPTION_TEXT_MAX} characters")
        chosen = element.get("initial_option")
        if isinstance(chosen, dict) and chosen not in options:
            problems.append("initial_option is not one of the options")
    return problems


# --- what Slack sends an app -------------------------------------------------------------


def http_mode_env(api_url: str, secret: str, **more: str) -> dict[str, str]:
    """A server's settings for Slack in HTTP mode against this recorder (`more`: other
    settings, e.g. PIZZABOT_PUBLIC_URL)."""
    return {
        "PIZZABOT_SLACK_MODE": "http",
        "PIZZABOT_SLACK_BOT_TOKEN": "xoxb-test",
        "PIZZABOT_SLACK_SIGNING_SECRET": secret,
        "PIZZABOT_SLACK_API_URL": api_url,
        **more,
    }


def signed_headers(
    secret: str, body: str, *, timestamp: int | None = None, content_type: str | None = None
) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature or "",
        "Content-Type": content_type or "application/x-www-form-urlencoded",
    }


async def post_interaction(
    url: str,
    payload: dict[str, Any],
    *,
    secret: str | None,
    timestamp: int | None = None,
    retry_num: int | None = None,
) -> httpx.Response:
    """POST an interaction payload as Slack does (form field `payload`), signed with `secret`
    (unsigned when None)."""
    body = urlencode({"payload": json.dumps(payload)})
    return await _post(url, body, secret, timestamp, retry_num, None)


async def post_command(
    url: str, command: dict[str, str], *, secret: str, retry_num: int | None = None
) -> httpx.Response:
    return await _post(url, urlencode(command), secret, None, retry_num, None)


async def post_event(
    url: str, event: dict[str, Any], *, secret: str, retry_num: int | None = None
) -> httpx.Response:
    return await _post(url, json.dumps(event), secret, None, retry_num, "application/json")


async def _post(
    url: str,
    body: str,
    secret: str | None,
    timestamp: int | None,
    retry_num: int | None,
    content_type: str | None,
) -> httpx.Response:
    headers = (
        signed_headers(secret, body, timestamp=timestamp, content_type=content_type)
        if secret is not None
        else {"Content-Type": content_type or "application/x-www-form-urlencoded"}
    )
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(url, content=body.encode(), headers=headers)


def _user(user: str) -> dict[str, Any]:
    return {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM}


def button_value(call: Call, action_id: str) -> str:
    """The value of the `action_id` button on the message `call` posted or updated: what
    Slack sends back when a person clicks it (for a decision, the item and the card's
    digest)."""
    raw = call.args.get("blocks") or []
    found = json.loads(raw) if isinstance(raw, str) else raw
    for block in found:
        for element in block.get("elements", []) if isinstance(block, dict) else []:
            if element.get("action_id") == action_id:
                return str(element.get("value") or "")
    raise AssertionError(f"no {action_id} button on the message: {raw}")


def block_actions(
    *,
    action_id: str,
    value: str,
    user: str,
    channel: str,
    message_ts: str,
    thread_ts: str | None = None,
    response_url: str = "https://hooks.slack.test/actions/T0PIZZA/1/x",
) -> dict[str, Any]:
    """A button click on a message, as Slack's `block_actions` payload carries it."""
    message: dict[str, Any] = {
        "bot_id": BOT_ID,
        "type": "message",
        "text": "…",
        "user": BOT_USER,
        "ts": message_ts,
        "team": TEAM,
        "blocks": [],
    }
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": _user(user),
        "api_app_id": APP_ID,
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
            **({"thread_ts": thread_ts} if thread_ts else {}),
        },
        "trigger_id": f"{int(time.time())}.1.{uuid.uuid4().hex}",
        "team": {"id": TEAM, "domain": "pizza"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "pizza"},
        "message": message,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": f"decide:{value.partition(':')[0]}",
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def home_block_actions(
    *, action_id: str, value: str, user: str, block_id: str | None = None
) -> dict[str, Any]:
    """A button click in the app's Home tab: the container is a view, and there is no
    conversation (no `channel`, no `message`, no `response_url`)."""
    view_id = "V" + uuid.uuid4().hex[:8]
    return {
        "type": "block_actions",
        "user": _user(user),
        "api_app_id": APP_ID,
        "token": "legacy-verification-token",
        "container": {"type": "view", "view_id": view_id},
        "trigger_id": f"{int(time.time())}.4.{uuid.uuid4().hex}",
        "team": {"id": TEAM, "domain": "pizza"},
        "enterprise": None,
        "is_enterprise_install": False,
        "view": {
            "id": view_id,
            "team_id": TEAM,
            "type": "home",
            "blocks": [],
            "private_metadata": "",
            "callback_id": "pizza_home",
            "state": {"values": {}},
            "hash": uuid.uuid4().hex,
            "app_id": APP_ID,
            "bot_id": BOT_ID,
        },
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id or f"decide:{value}",
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def app_home_opened(user: str, *, published: bool = False) -> dict[str, Any]:
    """The event Slack sends when `user` opens the app's Home tab (`view` once one was
    published for them)."""
    event: dict[str, Any] = {
        "type": "app_home_opened",
        "user": user,
        "channel": "D" + user.lstrip("UW"),
        "tab": "home",
        "event_ts": f"{time.time():.6f}",
    }
    if published:
        event["view"] = {"id": "V" + uuid.uuid4().hex[:8], "type": "home"}
    return event_callback(event)


def view_submission(*, view: dict[str, Any], user: str, values: dict[str, Any]) -> dict[str, Any]:
    """A modal submitted with `values` as its `state.values` (block_id -> action_id -> state);
    `view` is the view the app opened (from the recorded `views.open`)."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "pizza"},
        "user": _user(user),
        "api_app_id": APP_ID,
        "token": "legacy-verification-token",
        "trigger_id": f"{int(time.time())}.2.{uuid.uuid4().hex}",
        "view": {
            "id": "V" + uuid.uuid4().hex[:8],
            "team_id": TEAM,
            "type": "modal",
            "blocks": view.get("blocks", []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": values},
            "hash": uuid.uuid4().hex,
            "title": view.get("title"),
            "clear_on_close": False,
            "notify_on_close": False,
            "close": view.get("close"),
            "submit": view.get("submit"),
            "previous_view_id": None,
            "root_view_id": None,
            "app_id": APP_ID,
            "external_id": "",
            "app_installed_team_id": TEAM,
            "bot_id": BOT_ID,
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def text_value(value: str | None) -> dict[str, Any]:
    return {"value": {"type": "plain_text_input", "value": value}}


def number_value(value: str | None) -> dict[str, Any]:
    return {"value": {"type": "number_input", "value": value}}


def select_value(value: str | None) -> dict[str, Any]:
    option = (
        None
        if value is None
        else {"text": {"type": "plain_text", "text": value, "emoji": True}, "value": value}
    )
    return {"value": {"type": "static_select", "selected_option": option}}


def checkbox_value(checked: bool) -> dict[str, Any]:
    options = (
        [{"text": {"type": "plain_text", "text": "Yes", "emoji": True}, "value": "true"}]
        if checked
        else []
    )
    return {"value": {"type": "checkboxes", "selected_options": options}}


def slash_command(
    *, text: str, user: str, channel: str = "C123", response_url: str, command: str = "/pizza"
) -> dict[str, str]:
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM,
        "team_domain": "pizza",
        "channel_id": channel,
        "channel_name": "pizza",
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": f"{int(time.time())}.3.{uuid.uuid4().hex}",
    }


def event_callback(event: dict[str, Any], *, event_id: str | None = None) -> dict[str, Any]:
    """An Events API envelope around `event` (app_mention, message, …)."""
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM,
        "api_app_id": APP_ID,
        "event": {"event_ts": event.get("ts"), **event},
        "type": "event_callback",
        "event_id": event_id or "Ev" + uuid.uuid4().hex[:10].upper(),
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": TEAM,
                "user_id": BOT_USER,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": "4-" + uuid.uuid4().hex,
    }


def message_ts() -> str:
    return f"{time.time():.6f}"


def field_blocks(item: dict[str, Any]) -> dict[str, str]:
    """The edit modal's block_id of each argument of `item` (as the API shows it), by name."""
    fields = form_fields(item.get("schema") or {}, item.get("args") or {})
    return {f.name: field_block(i) for i, f in enumerate(fields)}


def filled_values(view: dict[str, Any], **changed: Any) -> dict[str, Any]:
    """The `state.values` Slack sends for a modal whose inputs keep their initial values,
    except `changed` (by block_id; a string, None, a bool for checkboxes)."""
    values: dict[str, Any] = {}
    for block in view.get("blocks", []):
        if block.get("type") != "input":
            continue
        block_id, element = block["block_id"], block["element"]
        action_id, kind = element["action_id"], element["type"]
        if kind == "checkboxes":
            checked = changed.get(block_id, bool(element.get("initial_options")))
            values[block_id] = {action_id: checkbox_value(bool(checked))["value"]}
        elif kind == "static_select":
            initial = (element.get("initial_option") or {}).get("value")
            values[block_id] = {action_id: select_value(changed.get(block_id, initial))["value"]}
        else:
            value = changed.get(block_id, element.get("initial_value"))
            values[block_id] = {action_id: {"type": kind, "value": value}}
    return values
