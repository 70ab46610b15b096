"""What people do in Telegram, translated into calls of the engine (`TelegramInbound`).

An update comes from the webhook (its secret token checked before the body is read) or from
long polling, and means the same either way:

- a button on a card (a callback query): Approve decides at once; Edit and Reject ask for
  more with a prompt the person replies to (the fields they change as `name: value` lines;
  the reason the agent reads);
- a reply to one of the bot's prompts: the edit or the reject it asked for;
- a reply to one of the bot's cards: a follow-up message for that card's run;
- `/pizza SKILL what to do` anywhere, or any other message in a private chat with the bot:
  a new run.

The engine decides who may do what (`pizzabot.channels.chat.ChatDesk`); this module passes the
Telegram user id along and answers in Telegram's terms (a callback's toast or alert, a
reply). An update Telegram sends again (it retries what it thinks was lost) is handled once.
"""

from __future__ import annotations

import html
import logging
from collections import OrderedDict
from typing import Any

from pizzabot.agent.model import Approve, Edit, Item, ItemKind, Reject
from pizzabot.channels.chat.card import clip
from pizzabot.channels.chat.desk import ChatDesk
from pizzabot.channels.chat.forms import edit_fields, edited_args, parse_lines
from pizzabot.channels.telegram.api import TelegramApi, TelegramError
from pizzabot.channels.telegram.render import (
    Message,
    edit_prompt,
    read_callback,
    read_prompt,
    reject_prompt,
)

__all__ = ["TelegramInbound"]

log = logging.getLogger(__name__)

_ALERT_MAX = 200  # characters of a callback query's answer
_SEEN_UPDATES = 1000
_COMMANDS = ("/pizza", "/start", "/help")


def _command(text: str) -> tuple[str, str] | None:
    """(command, the rest) for `/pizza …` or `/pizza@thebot …`; None for other text."""
    first, _, rest = text.strip().partition(" ")
    name = first.partition("@")[0].lower()
    return (name, rest.strip()) if name in _COMMANDS else None


class TelegramInbound:
    """Handles one update at a time; `desk` makes the engine calls."""

    def __init__(self, *, desk: ChatDesk, api: TelegramApi) -> None:
        self.desk = desk
        self.api = api
        self._seen: OrderedDict[int, None] = OrderedDict()

    def _again(self, update_id: Any) -> bool:
        """Whether this update was handled already (and remember it)."""
        if not isinstance(update_id, int):
            return False
        if update_id in self._seen:
            return True
        self._seen[update_id] = None
        while len(self._seen) > _SEEN_UPDATES:
            self._seen.popitem(last=False)
        return False

    async def handle(self, update: dict[str, Any]) -> None:
        """Handle one update; a failure is logged (it runs after Telegram had its answer)."""
        if self._again(update.get("update_id")):
            return
        query = update.get("callback_query")
        message = update.get("message")
        try:
            if isinstance(query, dict):
                await self.on_callback(query)
            elif isinstance(message, dict):
                await self.on_message(message, key=f"telegram:update:{update.get('update_id')}")
        except Exception:
            log.exception("telegram: update %s failed", update.get("update_id"))

    # -- replies -------------------------------------------------------------------------

    async def _send(self, chat: Any, msg: Message, *, reply_to: Any = None) -> None:
        params: dict[str, Any] = {
            "chat_id": chat,
            "text": msg.text,
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": True},
            "reply_markup": msg.markup,
        }
        if reply_to is not None:
            params["reply_parameters"] = {
                "message_id": reply_to,
                "allow_sending_without_reply": True,
            }
        try:
            await self.api.call("sendMessage", http_timeout=10.0, **params)
        except TelegramError as exc:
            log.warning("telegram: could not answer in chat %s: %s", chat, exc)

    async def _say(self, chat: Any, text: str, *, reply_to: Any = None) -> None:
        plain = Message(html.escape(clip(text, 3500), quote=False), None)
        await self._send(chat, plain, reply_to=reply_to)

    async def _toast(self, query_id: Any, text: str, *, alert: bool) -> None:
        try:
            await self.api.call(
                "answerCallbackQuery",
                http_timeout=10.0,
                callback_query_id=query_id,
                text=clip(text, _ALERT_MAX),
                show_alert=alert,
            )
        except TelegramError as exc:
            log.warning("telegram: could not answer a button: %s", exc)

    # -- buttons -------------------------------------------------------------------------

    async def on_callback(self, query: dict[str, Any]) -> None:
        user = query.get("from") or {}
        who = str(user.get("id") or "")
        message = query.get("message") or {}
        chat = (message.get("chat") or {}).get("id")
        parsed = read_callback(str(query.get("data") or ""))
        if parsed is None or not who:
            await self._toast(query.get("id"), "This button is not one of Pizza Bot's.", alert=True)
            return
        verb, item_id, seen = parsed
        if verb == "approve":
            note = await self.desk.decide(item_id, Approve(), user=who, seen=seen)
            await self._toast(query.get("id"), note or "Approved.", alert=note is not None)
            return
        got = await self.desk.openable(item_id, user=who, seen=seen, decision=verb)
        if isinstance(got, str):
            await self._toast(query.get("id"), got, alert=True)
            return
        if verb == "edit":
            base = self.desk.base_url
            prompt = edit_prompt(got, edit_fields(got), user=user, base_url=base)
        else:
            prompt = reject_prompt(got, user=user)
        await self._toast(query.get("id"), "Reply to the message below.", alert=False)
        await self._send(chat, prompt, reply_to=message.get("message_id"))

    # -- messages ------------------------------------------------------------------------

    async def on_message(self, message: dict[str, Any], *, key: str) -> None:
        user = message.get("from") or {}
        who = str(user.get("id") or "")
        if not who or user.get("is_bot"):
            return
        chat = message.get("chat") or {}
        text = str(message.get("text") or "")
        here = message.get("message_id")
        replied = message.get("reply_to_message")
        if isinstance(replied, dict) and str((replied.get("from") or {}).get("id")) == (
            self.api.bot_id
        ):
            await self._on_reply(message, replied, user=user, text=text)
            return
        command = _command(text)
        if command is not None:
            _, rest = command
            await self._say(
                chat.get("id"), await self.desk.start(rest, user=who, key=key), reply_to=here
            )
        elif chat.get("type") == "private" and text.strip():
            await self._say(
                chat.get("id"), await self.desk.start(text, user=who, key=key), reply_to=here
            )

    async def _on_reply(
        self, message: dict[str, Any], replied: dict[str, Any], *, user: dict[str, Any], text: str
    ) -> None:
        """A reply to the bot: to a prompt (the edit or reject it asked for), else to a card
        (a follow-up of its run)."""
        who = str(user.get("id"))
        chat = (message.get("chat") or {}).get("id")
        here = message.get("message_id")
        prompt = read_prompt(str(replied.get("text") or ""))
        if prompt is not None and prompt.verb == "reject":
            reason = "" if text.strip() == "-" else text.strip()
            note = await self.desk.decide(
                prompt.item_id, Reject(reason), user=who, seen=prompt.seen
            )
            await self._say(chat, note or "❌ Rejected.", reply_to=here)
            return
        if prompt is not None:
            got = await self.desk.openable(
                prompt.item_id, user=who, seen=prompt.seen, decision="edit"
            )
            if isinstance(got, str):
                await self._say(chat, got, reply_to=here)
            else:
                await self._edit(got, text, user=user, chat=chat, here=here, seen=prompt.seen)
            return
        run_id = await self.desk.run_of(f"{chat}:{replied.get('message_id')}")
        if run_id is None:
            return
        note = await self.desk.follow_up(run_id, text, user=who)
        if note:
            await self._say(chat, note, reply_to=here)

    async def _edit(
        self, item: Item, text: str, *, user: dict[str, Any], chat: Any, here: Any, seen: str
    ) -> None:
        fields = edit_fields(item)
        values, stray = parse_lines(text, fields)
        changed: dict[str, str | bool | None] = dict(values)
        errors: dict[str, str] = {}
        if not values:
            errors[""] = "name the fields you change, one per line, as name: value"
            if stray:
                errors[""] += f" ({clip(stray[0], 60)} names no field)"
        else:
            args, errors = edited_args(item, changed, whole=False)
        if errors:
            prompt = edit_prompt(
                item, fields, user=user, base_url=self.desk.base_url, errors=errors
            )
            await self._send(chat, prompt, reply_to=here)
            return
        note = await self.desk.decide(item.id, Edit(args), user=str(user.get("id")), seen=seen)
        done = (
            "✅ Answered."
            if item.kind is ItemKind.QUESTION
            else "✏️ Edited: it runs with your arguments."
        )
        await self._say(chat, note or done, reply_to=here)
