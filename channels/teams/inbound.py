"""What people do in Teams, translated into calls of the engine (`TeamsInbound`).

An activity reaches this module only with a verified Bot Framework token (`TeamsTokenGate`);
here it must also name the service URL that token names, and come from a channel the token's
key is endorsed for. Then:

- `adaptiveCard/action` (an `Action.Execute`): `refresh` answers each viewer's own copy of a
  card, with its buttons only for someone who may decide it; `approve` and `reject` decide
  as the person who clicked and answer with their new copy (saying why, when refused);
- `task/fetch` opens the edit dialog, `task/submit` checks it against the tool's schema (the
  form comes back with the errors under their fields) and decides;
- a message: in a run's thread, a follow-up of that run; in a personal chat, or mentioning
  the bot in a channel, a new run.

People are known by their Microsoft Entra object id (`from.aadObjectId`), the identity the
skills' `approvers.teams` lists. The engine decides who may do what
(`pizzabot.channels.chat.ChatDesk`).
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import Approve, Edit, Item, ItemKind, Reject
from pizzabot.channels.chat.card import clip
from pizzabot.channels.chat.desk import GONE, ChatDesk
from pizzabot.channels.chat.forms import edit_fields, edited_args
from pizzabot.channels.teams.auth import Caller
from pizzabot.channels.teams.cards import (
    CONTENT_TYPE,
    attachment,
    fields_digest,
    form_card,
    form_values,
    item_card,
)
from pizzabot.channels.teams.connector import Connector, ConnectorError

__all__ = ["Reply", "TeamsInbound"]

log = logging.getLogger(__name__)

_MENTION = re.compile(r"<at>.*?</at>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Reply:
    """The HTTP answer to an activity (its status and JSON body, None for none), and the
    work to do once it is sent."""

    status: int = 200
    body: Any = None
    later: Callable[[], Awaitable[None]] | None = None


def _card_reply(card: dict[str, Any]) -> Reply:
    return Reply(body={"statusCode": 200, "type": CONTENT_TYPE, "value": card})


def _task_message(text: str) -> Reply:
    return Reply(body={"task": {"type": "message", "value": clip(text, 1000)}})


def plain_text(text: str) -> str:
    """A message's text without the bot's mention and Teams' markup."""
    return html.unescape(_TAG.sub("", _MENTION.sub("", text))).strip()


class TeamsInbound:
    """Answers one activity at a time; `desk` makes the engine calls."""

    def __init__(self, *, desk: ChatDesk, connector: Connector, base_url: str) -> None:
        self.desk = desk
        self.connector = connector
        self.base_url = base_url

    async def handle(self, activity: dict[str, Any], caller: Caller) -> Reply:
        service_url = str(activity.get("serviceUrl") or "")
        if service_url.rstrip("/") != caller.service_url.rstrip("/"):
            return Reply(401, {"detail": "the activity's serviceUrl is not its token's"})
        if caller.endorsements and activity.get("channelId") not in caller.endorsements:
            return Reply(401, {"detail": "the token's key is not endorsed for this channel"})
        conversation = activity.get("conversation") or {}
        if isinstance(conversation, dict) and conversation.get("id"):
            self.connector.heard(str(conversation["id"]), service_url)
        user = str((activity.get("from") or {}).get("aadObjectId") or "")
        kind, name = activity.get("type"), activity.get("name")
        given = activity.get("value")
        value: dict[str, Any] = given if isinstance(given, dict) else {}
        if kind == "invoke" and name == "adaptiveCard/action":
            return await self._action(value.get("action") or {}, user)
        if kind == "invoke" and name == "task/fetch":
            return await self._fetch(value.get("data") or {}, user)
        if kind == "invoke" and name == "task/submit":
            return await self._submit(value.get("data") or {}, user)
        if kind == "message" and user:
            return await self._message(activity, user)
        return Reply()

    # -- cards ---------------------------------------------------------------------------

    async def _action(self, action: dict[str, Any], user: str) -> Reply:
        given = action.get("data")
        data: dict[str, Any] = given if isinstance(given, dict) else {}
        item_id, seen = str(data.get("item") or ""), str(data.get("seen") or "") or None
        verb = action.get("verb")
        note: str | None = None
        if verb == "approve":
            note = await self.desk.decide(item_id, Approve(), user=user, seen=seen)
        elif verb == "reject":
            reason = str(data.get("reason") or "").strip()
            note = await self.desk.decide(item_id, Reject(reason), user=user, seen=seen)
        elif verb != "refresh":
            return Reply(
                body={
                    "statusCode": 400,
                    "type": "application/vnd.microsoft.error",
                    "value": {"code": "BadRequest", "message": "unknown verb"},
                }
            )
        try:
            item = await self.desk.store.get_item(item_id)
        except NotFound:
            return Reply(
                body={
                    "statusCode": 200,
                    "type": "application/vnd.microsoft.activity.message",
                    "value": GONE,
                }
            )
        decides = (
            bool(user)
            and not item.decided
            and bool(self.desk.access.may_decide(self.desk.who(user), item))
        )
        return _card_reply(item_card(item, base_url=self.base_url, decides=decides, note=note))

    async def _fetch(self, data: dict[str, Any], user: str) -> Reply:
        got = await self._openable(data, user)
        if isinstance(got, str):
            return _task_message(got)
        form = form_card(got, edit_fields(got), base_url=self.base_url)
        return self._dialog(got, form)

    def _dialog(self, item: Item, form: dict[str, Any] | None) -> Reply:
        if form is None:
            url = f"{self.base_url.rstrip('/')}/items/{item.id}"
            return _task_message(f"This form does not fit in Teams: edit it on the web page, {url}")
        title = "Answer" if item.kind is ItemKind.QUESTION else "Edit arguments"
        dialog = {"title": title, "width": "large", "height": "large", "card": attachment(form)}
        return Reply(body={"task": {"type": "continue", "value": dialog}})

    async def _openable(self, data: dict[str, Any], user: str) -> Item | str:
        item_id, seen = str(data.get("item") or ""), str(data.get("seen") or "") or None
        if not user:
            return self.desk.not_approver
        return await self.desk.openable(item_id, user=user, seen=seen, decision="edit")

    async def _submit(self, data: dict[str, Any], user: str) -> Reply:
        got = await self._openable(data, user)
        if isinstance(got, str):
            return _task_message(got)
        fields = edit_fields(got)
        if data.get("shape") != fields_digest(fields):
            return _task_message("This form is out of date: open it again from the card.")
        raw = form_values(data, fields)
        args, errors = edited_args(got, raw, whole=True)
        if errors:
            return self._dialog(
                got, form_card(got, fields, base_url=self.base_url, values=raw, errors=errors)
            )
        note = await self.desk.decide(got.id, Edit(args), user=user, seen=str(data.get("seen")))
        done = (
            "Answered." if got.kind is ItemKind.QUESTION else "Edited: it runs with your arguments."
        )
        return _task_message(note or done)

    # -- messages ------------------------------------------------------------------------

    async def _message(self, activity: dict[str, Any], user: str) -> Reply:
        conversation = activity.get("conversation") or {}
        where = str(conversation.get("id") or "")
        # The id a skill's `deliver.teams` names this conversation by, for whoever sets one up.
        log.info("teams: a message from %s in conversation %s", user, where.partition(";")[0])
        text = plain_text(str(activity.get("text") or ""))
        answer: str | None
        run_id = await self.desk.run_of(where) if ";messageid=" in where else None
        if run_id is not None:
            answer = await self.desk.follow_up(run_id, text, user=user)
        elif conversation.get("conversationType") == "personal" or ";messageid=" not in where:
            key = f"teams:activity:{activity.get('id')}" if activity.get("id") else None
            answer = await self.desk.start(text, user=user, key=key)
        else:
            answer = None  # a thread that is no run's: not for the bot
        if not answer:
            return Reply()
        service_url, to = str(activity.get("serviceUrl")), str(activity.get("id") or "")

        async def later() -> None:
            reply = {"type": "message", "text": clip(answer or "", 4000), "textFormat": "plain"}
            try:
                await self.connector.reply(service_url, where, to, reply)
            except ConnectorError as exc:
                log.warning("teams: could not answer a message: %s", exc)

        return Reply(later=later)
