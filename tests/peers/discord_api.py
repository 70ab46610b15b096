"""A local Discord for tests: a recorder of the HTTP API calls Pizza Bot makes, and
interactions signed with a test Ed25519 key pair the way Discord signs them.

`DiscordPeer` answers under `/api/v10` what the bot calls: a channel message's create
(`create_message`, with a fresh snowflake) and edit (`edit_message`), the command's
registration (`commands`), and an interaction's follow-ups (`followup`, `edit_original`). The
bot's own calls must carry `Bot <token>`; follow-ups carry nothing but the interaction's token.

`payload_problems` checks what the bot sent, and `response_problems` what it answered an
interaction with, against Discord's documented limits (embeds, components, modals, commands),
the way Discord answers 400 "Invalid Form Body".
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Mapping
from typing import Any

import httpx
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.peers.recorder import Call, Recorder

APPLICATION_ID = "1100000000000000001"
TOKEN = "discord-bot-token-for-the-local-peer"
GUILD = "1200000000000000001"


class Signer:
    """A test application's key pair: `public_hex` is what the bot is configured with."""

    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        raw = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.public_hex = raw.hex()

    def headers(self, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signature = self.key.sign(stamp.encode() + body).hex()
        return {
            "Content-Type": "application/json",
            "X-Signature-Ed25519": signature,
            "X-Signature-Timestamp": stamp,
        }


class DiscordPeer(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1_300_000_000_000_000_001)
        self.messages: dict[str, dict[str, Any]] = {}
        #: The DM channel opened with each user.
        self.dms: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"{self.base}/api/v10"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/api/v10/users/@me/channels", self._open_dm)
        app.router.add_post("/api/v10/channels/{channel}/messages", self._create)
        app.router.add_patch("/api/v10/channels/{channel}/messages/{message}", self._edit)
        app.router.add_put("/api/v10/applications/{app}/commands", self._commands)
        app.router.add_post("/api/v10/webhooks/{app}/{token}", self._followup)
        app.router.add_patch(
            "/api/v10/webhooks/{app}/{token}/messages/@original", self._edit_original
        )

    def problems(self, call: Call) -> list[str]:
        if call.method == "commands":
            return [p for c in call.args.get("list", []) for p in command_problems(c)]
        return payload_problems(call.args)

    async def _handle(
        self, request: web.Request, method: str, *, bot: bool, answer: Any
    ) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        args = body if isinstance(body, dict) else {"list": body}
        auth = request.headers.get("Authorization")
        failure = self.failure_for(method)
        if failure is not None:
            data = {"message": "You are being rate limited.", "code": 0}
            headers = {}
            if failure.retry_after is not None:
                data["retry_after"] = failure.retry_after
                headers["Retry-After"] = str(failure.retry_after)
            self.record(Call(method, args, auth, failure.status, data))
            return web.json_response(data, status=failure.status, headers=headers)
        if bot and auth != f"Bot {TOKEN}":
            self.record(Call(method, args, auth, 401, None))
            return web.json_response({"message": "401: Unauthorized", "code": 0}, status=401)
        if not bot and auth is not None:
            self.record(Call(method, args, auth, 400, None))
            return web.json_response({"message": "a follow-up carries no token"}, status=400)
        result = answer(request, args) if callable(answer) else answer
        self.record(Call(method, args, auth, 200, result))
        return web.json_response(result)

    def _message(self, request: web.Request, args: dict[str, Any]) -> dict[str, Any]:
        message = {
            **args,
            "id": str(next(self._ids)),
            "channel_id": request.match_info["channel"],
            "author": {"id": APPLICATION_ID, "bot": True},
        }
        self.messages[message["id"]] = message
        return dict(message)  # the answer as it was then: later edits change the stored one

    async def _open_dm(self, request: web.Request) -> web.Response:
        """A DM channel with `recipient_id` (the same one each time, as Discord answers)."""

        def dm(request: web.Request, args: dict[str, Any]) -> dict[str, Any]:
            user = str(args.get("recipient_id") or "")
            channel = self.dms.setdefault(user, str(next(self._ids)))
            return {"id": channel, "type": 1, "recipients": [{"id": user}]}

        return await self._handle(request, "open_dm", bot=True, answer=dm)

    async def _create(self, request: web.Request) -> web.Response:
        return await self._handle(request, "create_message", bot=True, answer=self._message)

    async def _edit(self, request: web.Request) -> web.Response:
        def edit(request: web.Request, args: dict[str, Any]) -> dict[str, Any]:
            message = self.messages.setdefault(request.match_info["message"], {})
            message.update(args)
            return dict(message)

        return await self._handle(request, "edit_message", bot=True, answer=edit)

    async def _commands(self, request: web.Request) -> web.Response:
        return await self._handle(request, "commands", bot=True, answer=lambda r, a: a["list"])

    async def _followup(self, request: web.Request) -> web.Response:
        return await self._handle(
            request, "followup", bot=False, answer=lambda r, a: {**a, "id": str(next(self._ids))}
        )

    async def _edit_original(self, request: web.Request) -> web.Response:
        return await self._handle(request, "edit_original", bot=False, answer=lambda r, a: a)


# --- what Discord accepts -----------------------------------------------------------------


def _embed_problems(embed: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    limits = {"title": 256, "description": 4096}
    for key, limit in limits.items():
        if len(str(embed.get(key) or "")) > limit:
            problems.append(f"embed {key} over {limit}")
    fields = embed.get("fields") or []
    if len(fields) > 25:
        problems.append(f"{len(fields)} embed fields (25 at most)")
    total = len(str(embed.get("title") or "")) + len(str(embed.get("description") or ""))
    for f in fields:
        name, value = str(f.get("name") or ""), str(f.get("value") or "")
        if not 1 <= len(name) <= 256 or not 1 <= len(value) <= 1024:
            problems.append(f"a field of {len(name)}/{len(value)} characters")
        total += len(name) + len(value)
    footer = str((embed.get("footer") or {}).get("text") or "")
    if len(footer) > 2048:
        problems.append("footer over 2048")
    total += len(footer)
    if total > 6000:
        problems.append(f"embed of {total} characters (6000 at most)")
    return problems


def _components_problems(rows: Any, *, modal: bool = False) -> list[str]:
    problems: list[str] = []
    if len(rows) > 5:
        problems.append(f"{len(rows)} rows (5 at most)")
    seen: set[str] = set()
    for row in rows:
        if row.get("type") != 1:
            problems.append("a top-level component that is no action row")
        children = row.get("components") or []
        if not 1 <= len(children) <= (1 if modal else 5):
            problems.append(f"a row of {len(children)} components")
        for c in children:
            if c.get("type") == 2 and c.get("style") == 5:
                problems += _link_problems(c)
                continue
            custom = str(c.get("custom_id") or "")
            if not 1 <= len(custom) <= 100:
                problems.append(f"custom_id of {len(custom)} characters")
            if custom in seen:
                problems.append(f"custom_id {custom!r} twice")
            seen.add(custom)
            if "url" in c:
                problems.append("only a link button (style 5) has a url")
            if modal:
                problems += _text_input_problems(c)
            elif c.get("type") == 3:
                problems += _select_problems(c)
            elif c.get("type") == 2:
                if not 1 <= len(str(c.get("label") or "")) <= 80:
                    problems.append("a button label of 1-80 characters is needed")
                if c.get("style") not in (1, 2, 3, 4):
                    problems.append(f"button style {c.get('style')}")
    return problems


def _link_problems(c: Mapping[str, Any]) -> list[str]:
    """A link button: a label, a url of at most 512 characters, and no custom_id."""
    problems: list[str] = []
    if not 1 <= len(str(c.get("label") or "")) <= 80:
        problems.append("a button label of 1-80 characters is needed")
    url = str(c.get("url") or "")
    if not url.startswith(("http://", "https://")) or len(url) > 512:
        problems.append(f"a link button's url {url[:80]!r}")
    if "custom_id" in c:
        problems.append("a link button has no custom_id")
    return problems


def _select_problems(c: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    options = c.get("options") or []
    if not 1 <= len(options) <= 25:
        problems.append(f"a menu of {len(options)} options (1-25)")
    for o in options:
        for key in ("label", "value", "description"):
            if len(str(o.get(key) or "")) > 100:
                problems.append(f"an option {key} over 100")
        if not str(o.get("label") or "") or not str(o.get("value") or ""):
            problems.append("an option without a label or value")
    if not 0 <= int(c.get("min_values", 1)) <= int(c.get("max_values", 1)) <= len(options):
        problems.append("min_values/max_values out of range")
    if len(str(c.get("placeholder") or "")) > 150:
        problems.append("a menu placeholder over 150")
    return problems


def _text_input_problems(c: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if c.get("type") != 4 or c.get("style") not in (1, 2):
        problems.append("a modal holds text inputs of style 1 or 2")
    if not 1 <= len(str(c.get("label") or "")) <= 45:
        problems.append(f"a label of {len(str(c.get('label') or ''))} characters (1-45)")
    if len(str(c.get("value") or "")) > 4000:
        problems.append("a value over 4000")
    if len(str(c.get("placeholder") or "")) > 100:
        problems.append("a placeholder over 100")
    for key in ("min_length", "max_length"):
        if key in c and not 0 <= int(c[key]) <= 4000:
            problems.append(f"{key} out of 0-4000")
    return problems


def payload_problems(message: Mapping[str, Any]) -> list[str]:
    """What Discord would refuse in a message's body."""
    problems: list[str] = []
    if len(str(message.get("content") or "")) > 2000:
        problems.append("content over 2000")
    embeds = message.get("embeds") or []
    if len(embeds) > 10:
        problems.append("more than 10 embeds")
    for embed in embeds:
        problems += _embed_problems(embed)
    problems += _components_problems(message.get("components") or [])
    if "content" in message and message.get("allowed_mentions") != {"parse": []}:
        problems.append("a message that may mention people (allowed_mentions)")
    return problems


def response_problems(response: Mapping[str, Any]) -> list[str]:
    """What Discord would refuse in an interaction's answer."""
    kind, data = response.get("type"), response.get("data") or {}
    if kind == 9:
        problems = []
        if not 1 <= len(str(data.get("title") or "")) <= 45:
            problems.append("a modal title of 1-45 characters is needed")
        if len(str(data.get("custom_id") or "")) > 100:
            problems.append("a modal custom_id over 100")
        rows = data.get("components") or []
        if not 1 <= len(rows) <= 5:
            problems.append(f"a modal of {len(rows)} inputs (1-5)")
        return problems + _components_problems(rows, modal=True)
    if kind in (4, 7):
        return payload_problems(data)
    if kind in (1, 5, 6):
        return []
    return [f"interaction response type {kind}"]


def command_problems(command: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if not re.fullmatch(r"[-_\w]{1,32}", str(command.get("name") or "")):
        problems.append("a command name of 1-32 lower-case word characters is needed")
    if not 1 <= len(str(command.get("description") or "")) <= 100:
        problems.append("a command description of 1-100 characters is needed")
    for option in command.get("options") or []:
        if not 1 <= len(str(option.get("description") or "")) <= 100:
            problems.append("an option description of 1-100 characters is needed")
    return problems


# --- what Discord sends the app -----------------------------------------------------------

_ids = itertools.count(1_400_000_000_000_000_001)


def _member(user: str) -> dict[str, Any]:
    return {"user": {"id": user, "username": f"user{user[-4:]}"}, "roles": []}


def component(*, user: str, custom_id: str, message: Mapping[str, Any]) -> dict[str, Any]:
    """A click on the button `custom_id` of `message` (what the bot posted), in a server."""
    return {
        "id": str(next(_ids)),
        "application_id": APPLICATION_ID,
        "type": 3,
        "token": f"itoken-{next(_ids)}",
        "version": 1,
        "guild_id": GUILD,
        "channel_id": message.get("channel_id"),
        "member": _member(user),
        "message": dict(message),
        "data": {"custom_id": custom_id, "component_type": 2},
    }


def modal_submit(
    *, user: str, modal: Mapping[str, Any], values: Mapping[str, str]
) -> dict[str, Any]:
    """The submission of `modal` (what the bot answered with) with `values` by input id;
    inputs not named keep the value the modal showed."""
    rows = []
    for row in modal["components"]:
        [text] = row["components"]
        value = values.get(text["custom_id"], text.get("value", ""))
        rows.append(
            {"type": 1, "components": [{"type": 4, "custom_id": text["custom_id"], "value": value}]}
        )
    return {
        "id": str(next(_ids)),
        "application_id": APPLICATION_ID,
        "type": 5,
        "token": f"itoken-{next(_ids)}",
        "version": 1,
        "guild_id": GUILD,
        "member": _member(user),
        "data": {"custom_id": modal["custom_id"], "components": rows},
    }


def command(*, user: str, text: str | None) -> dict[str, Any]:
    options = [] if text is None else [{"type": 3, "name": "text", "value": text}]
    return {
        "id": str(next(_ids)),
        "application_id": APPLICATION_ID,
        "type": 2,
        "token": f"itoken-{next(_ids)}",
        "version": 1,
        "guild_id": GUILD,
        "member": _member(user),
        "data": {"id": "1", "name": "pizza", "type": 1, "options": options},
    }


def pick(*, user: str, menu_message: Mapping[str, Any], values: list[str]) -> dict[str, Any]:
    """A choice in the menu of `menu_message` (an interaction's answer's data)."""
    [row] = menu_message["components"]
    [menu] = row["components"]
    interaction = component(user=user, custom_id=menu["custom_id"], message=menu_message)
    interaction["data"] = {"custom_id": menu["custom_id"], "component_type": 3, "values": values}
    return interaction


def menu_value(menu_message: Mapping[str, Any], label: str) -> str:
    """The value of the menu option labelled `label`."""
    [row] = menu_message["components"]
    [menu] = row["components"]
    return next(str(o["value"]) for o in menu["options"] if o["label"] == label)


def button_id(message: Mapping[str, Any], label: str) -> str:
    for row in message.get("components") or []:
        for c in row.get("components") or []:
            if c.get("label") == label:
                return str(c["custom_id"])
    raise AssertionError(f"no button {label!r}")


async def post_interaction(
    url: str,
    interaction: dict[str, Any] | bytes,
    *,
    signer: Signer | None,
    timestamp: int | None = None,
) -> httpx.Response:
    """POST an interaction signed by `signer` (unsigned without one)."""
    body = interaction if isinstance(interaction, bytes) else json.dumps(interaction).encode()
    headers = (
        signer.headers(body, timestamp=timestamp)
        if signer
        else {"Content-Type": "application/json"}
    )
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(url, content=body, headers=headers)
