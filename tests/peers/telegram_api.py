"""A local Telegram Bot API for tests: a recorder of the methods Pizza Bot calls, updates for
long polling, and webhook updates sent with the secret token.

`TelegramPeer` answers `POST /bot<token>/<method>` as Telegram does (`sendMessage` with a
fresh `message_id`, `editMessageText`, `answerCallbackQuery`, `setWebhook`, `deleteWebhook`,
`getUpdates` from a queue the test fills), records every call with the token it came with,
and can be told to fail the next calls (a 429 with `retry_after`, a 500).

`message_problems` checks what the bot sent against Telegram's documented limits the way
Telegram answers "Bad Request": a text of 1 to 4,096 characters once its HTML is read, HTML
of only the tags Telegram knows (properly nested, entities it can read), an inline keyboard
whose buttons have a text and exactly one action with `callback_data` of 1 to 64 bytes, a
force-reply placeholder of at most 64 characters, a callback answer of at most 200.
"""

from __future__ import annotations

import asyncio
import html
import itertools
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import httpx
from aiohttp import web

from tests.peers.recorder import Call, Recorder

BOT_ID = 7000001
TOKEN = f"{BOT_ID}:AAtest-token-for-the-local-peer"
BOT_USER: dict[str, Any] = {"id": BOT_ID, "is_bot": True, "first_name": "Pizza Bot"}

_TAGS = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-spoiler",
    "span",
}


class TelegramPeer(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(100)
        self._updates: asyncio.Queue[dict[str, Any]] | None = None
        self.sent: dict[tuple[str, int], dict[str, Any]] = {}

    @property
    def url(self) -> str:
        return self.base

    def routes(self, app: web.Application) -> None:
        self._updates = asyncio.Queue()
        app.router.add_post("/bot{token}/{method}", self._api)

    def problems(self, call: Call) -> list[str]:
        return message_problems(call.method, call.args)

    async def push_update(self, update: dict[str, Any]) -> None:
        """Queue an update for the bot's next `getUpdates`."""
        assert self._updates is not None
        queue = self._updates
        await self.there(queue.put(update))

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = await request.json() if request.can_read_body else {}
        token = request.match_info["token"]
        failure = self.failure_for(method)
        if failure is not None:
            body: dict[str, Any] = {"ok": False, "error_code": failure.status}
            body["description"] = "Too Many Requests" if failure.status == 429 else "Internal"
            if failure.retry_after is not None:
                body["parameters"] = {"retry_after": failure.retry_after}
            self.record(Call(method, args, token, failure.status, body))
            return web.json_response(body, status=failure.status)
        if token != TOKEN:
            body = {"ok": False, "error_code": 401, "description": "Unauthorized"}
            self.record(Call(method, args, token, 401, body))
            return web.json_response(body, status=401)
        result = await self._answer(method, args)
        self.record(Call(method, args, token, 200, result))
        return web.json_response({"ok": True, "result": result})

    async def _answer(self, method: str, args: dict[str, Any]) -> Any:
        match method:
            case "sendMessage":
                message = {
                    "message_id": next(self._ids),
                    "from": BOT_USER,
                    "chat": {"id": int(args["chat_id"]), "type": "supergroup"},
                    "date": 1_700_000_000,
                    "text": html_text(str(args.get("text") or "")),
                }
                self.sent[(str(args["chat_id"]), message["message_id"])] = message
                return message
            case "editMessageText":
                key = (str(args["chat_id"]), int(args["message_id"]))
                if key in self.sent:
                    self.sent[key]["text"] = html_text(str(args.get("text") or ""))
                return self.sent.get(key, True)
            case "getUpdates":
                return await self._take(float(args.get("timeout") or 0))
        return True

    async def _take(self, timeout: float) -> list[dict[str, Any]]:
        assert self._updates is not None
        try:
            async with asyncio.timeout(min(timeout, 1.0)):
                first = await self._updates.get()
        except TimeoutError:
            return []
        taken = [first]
        while not self._updates.empty():
            taken.append(self._updates.get_nowait())
        return taken

    def message(self, call: Call) -> dict[str, Any]:
        """The message a `sendMessage` call made, as Telegram sends it back in a reply's
        `reply_to_message` (its text as edited since)."""
        answer: dict[str, Any] = call.answer
        return dict(self.sent[(str(call.args["chat_id"]), int(answer["message_id"]))])


# --- what Telegram accepts -----------------------------------------------------------------


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.open: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _TAGS:
            self.errors.append(f"unsupported tag <{tag}>")
        if tag == "a" and not dict(attrs).get("href"):
            self.errors.append("<a> without href")
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes nothing open")
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        if "<" in data or ">" in data:
            self.errors.append("a bare < or >")
        self.text.append(data)

    def handle_entityref(self, name: str) -> None:
        if name not in {"lt", "gt", "amp", "quot"}:
            self.errors.append(f"unknown entity &{name};")
        self.text.append(html.unescape(f"&{name};"))

    def handle_charref(self, name: str) -> None:
        self.text.append(html.unescape(f"&#{name};"))


def html_text(text: str) -> str:
    """What a person reads of an HTML message: its text without the markup."""
    parser = _Html()
    parser.feed(text)
    parser.close()
    return "".join(parser.text)


def _text_problems(text: Any, parse_mode: Any) -> list[str]:
    if not isinstance(text, str):
        return ["text is missing"]
    shown = text
    problems: list[str] = []
    if parse_mode == "HTML":
        parser = _Html()
        parser.feed(text)
        parser.close()
        problems += [f"can't parse entities: {e}" for e in parser.errors]
        if parser.open:
            problems.append(f"can't parse entities: <{parser.open[-1]}> is never closed")
        shown = "".join(parser.text)
    units = len(shown.strip().encode("utf-16-le")) // 2
    if not 1 <= units <= 4096:
        problems.append(f"text is {units} characters after entities parsing (1-4096)")
    return problems


def _button_url_ok(url: str) -> bool:
    """What Telegram takes as a button's link: http(s) to a host name with a dot; it refuses
    localhost and bare IP addresses ("Wrong HTTP URL")."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https") or "." not in host:
        return False
    return not all(part.isdigit() for part in host.split(".")) and ":" not in host


def _markup_problems(markup: Any) -> list[str]:
    if markup is None:
        return []
    if not isinstance(markup, dict):
        return ["reply_markup is not an object"]
    if "force_reply" in markup:
        placeholder = str(markup.get("input_field_placeholder") or "")
        return ["input_field_placeholder over 64 characters"] if len(placeholder) > 64 else []
    problems: list[str] = []
    for row in markup.get("inline_keyboard") or []:
        for button in row:
            if not str(button.get("text") or "").strip():
                problems.append("a button without text")
            actions = [k for k in ("callback_data", "url") if k in button]
            if len(actions) != 1:
                problems.append(f"a button must have exactly one action, has {actions}")
            if "url" in button and not _button_url_ok(str(button["url"])):
                problems.append(f"Wrong HTTP URL: {str(button['url'])[:80]!r}")
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                problems.append(f"BUTTON_DATA_INVALID: {len(str(data).encode())} bytes")
    return problems


def message_problems(method: str, args: dict[str, Any]) -> list[str]:
    """What Telegram would refuse in a call of `method` with `args`."""
    if method in ("sendMessage", "editMessageText"):
        return _text_problems(args.get("text"), args.get("parse_mode")) + _markup_problems(
            args.get("reply_markup")
        )
    if method == "answerCallbackQuery":
        text = str(args.get("text") or "")
        return [f"callback answer of {len(text)} characters (0-200)"] if len(text) > 200 else []
    return []


# --- what Telegram sends the bot -----------------------------------------------------------

_updates = itertools.count(5000)
_messages = itertools.count(9000)


def person(user_id: int, name: str = "Ann") -> dict[str, Any]:
    return {"id": user_id, "is_bot": False, "first_name": name}


def callback_update(
    *, user: int, data: str, card: dict[str, Any], query_id: str | None = None
) -> dict[str, Any]:
    """A click on a button of `card` (a message the bot sent)."""
    update_id = next(_updates)
    return {
        "update_id": update_id,
        "callback_query": {
            "id": query_id or f"q{update_id}",
            "from": person(user),
            "message": card,
            "chat_instance": "ci1",
            "data": data,
        },
    }


def message_update(
    *,
    user: int,
    chat: int,
    text: str,
    reply_to: dict[str, Any] | None = None,
    chat_type: str = "supergroup",
) -> dict[str, Any]:
    """A message from `user` in `chat`, a reply to `reply_to` when given."""
    message: dict[str, Any] = {
        "message_id": next(_messages),
        "from": person(user),
        "chat": {"id": chat, "type": chat_type},
        "date": 1_700_000_100,
        "text": text,
    }
    if reply_to is not None:
        message["reply_to_message"] = reply_to
    return {"update_id": next(_updates), "message": message}


def button_data(call: Call, label: str) -> str:
    """The callback_data of the button labelled `label` on the message `call` sent."""
    markup = call.args.get("reply_markup") or {}
    for row in markup.get("inline_keyboard") or []:
        for button in row:
            if button.get("text") == label:
                return str(button["callback_data"])
    raise AssertionError(f"no button {label!r} in {markup}")


async def post_update(
    url: str, update: dict[str, Any] | bytes, *, secret: str | None
) -> httpx.Response:
    """POST an update to the webhook, with `secret` as its secret token header."""
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Telegram-Bot-Api-Secret-Token"] = secret
    body = update if isinstance(update, bytes) else None
    async with httpx.AsyncClient(timeout=10) as client:
        if body is not None:
            return await client.post(url, content=body, headers=headers)
        return await client.post(url, json=update, headers=headers)
