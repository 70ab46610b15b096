"""What people do in Discord, translated into calls of the engine (`DiscordInbound`).

An interaction (its signature already checked) gets its answer inside Discord's 3 seconds;
the work that may take longer happens after the answer, which says "working on it" (a deferred
response), and its outcome is written into that answer afterwards:

- `/pizza SKILL what to do`: a deferred note, then the run is started and the note says so;
- Approve: a deferred update, then the decision; a refusal is told in a note only the clicker
  sees (the card itself is updated by the outbox, like every copy);
- Edit and Reject: a modal at once (or a note saying why not: not an approver, decided
  already, the card changed); its submission is checked against the tool's schema at once
  (errors come back with a button to try again), then decided after a deferred note;
- Reply to the run (on a run's result): a modal, then the follow-up.

The engine decides who may do what (`pizzabot.channels.chat.ChatDesk`); this module passes
the Discord user id along and answers in Discord's terms.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pizzabot.agent.model import Approve, Edit, Item, ItemKind, Reject
from pizzabot.channels.chat.desk import ChatDesk
from pizzabot.channels.chat.forms import edit_fields, edited_args, errors_text
from pizzabot.channels.discord import render
from pizzabot.channels.discord.api import DiscordApi, DiscordError

__all__ = ["Answer", "DiscordInbound"]

log = logging.getLogger(__name__)

PING, COMMAND, COMPONENT, MODAL_SUBMIT = 1, 2, 3, 5
PONG, MESSAGE, DEFERRED_MESSAGE, DEFERRED_UPDATE, MODAL = 1, 4, 5, 6, 9

Later = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Answer:
    """The HTTP answer to an interaction, and the work to do once it is sent (None: none)."""

    body: dict[str, Any]
    later: Later | None = None


def _user(interaction: dict[str, Any]) -> str:
    member = interaction.get("member")
    user = member.get("user") if isinstance(member, dict) else interaction.get("user")
    return str(user.get("id") or "") if isinstance(user, dict) else ""


def _note(text: str, components: list[dict[str, Any]] | None = None) -> Answer:
    return Answer({"type": MESSAGE, "data": render.note(text, components=components)})


class DiscordInbound:
    """Answers one interaction at a time; `desk` makes the engine calls."""

    def __init__(self, *, desk: ChatDesk, api: DiscordApi) -> None:
        self.desk = desk
        self.api = api

    async def handle(self, interaction: dict[str, Any]) -> Answer:
        kind = interaction.get("type")
        if kind == PING:
            return Answer({"type": PONG})
        user = _user(interaction)
        data = interaction.get("data")
        if not user or not isinstance(data, dict):
            return _note("Pizza Bot could not read this.")
        if kind == COMMAND:
            return self._command(interaction, data, user)
        parts = render.read_custom_id(str(data.get("custom_id") or ""))
        if parts is None:
            return _note("This is not one of Pizza Bot's buttons.")
        if kind == COMPONENT:
            return await self._component(interaction, parts, user)
        if kind == MODAL_SUBMIT:
            return await self._submitted(interaction, parts, data, user)
        return _note("Pizza Bot does not handle this kind of interaction.")

    # -- answering later -----------------------------------------------------------------

    def _deferred(
        self,
        interaction: dict[str, Any],
        work: Callable[[], Awaitable[str | None]],
        *,
        update: bool = False,
    ) -> Answer:
        """Answer "working on it" now; write what `work` says into the answer afterwards
        (for a deferred update: as a new note only the person sees, when there is one)."""
        token = str(interaction.get("token") or "")
        base = f"/webhooks/{self.api.application_id}/{token}"

        async def later() -> None:
            try:
                text = await work()
            except Exception:
                log.exception("discord: an interaction's work failed")
                text = "Something went wrong; nothing may have been done. Try the web page."
            try:
                if update and text:
                    await self.api.request(
                        "POST", base, json=render.note(text), bot=False, timeout=10
                    )
                elif not update:
                    body = render.note(text or "Done.")
                    body.pop("flags")
                    await self.api.request(
                        "PATCH", base + "/messages/@original", json=body, bot=False, timeout=10
                    )
            except DiscordError as exc:
                log.warning("discord: could not answer an interaction: %s", exc)

        kind = DEFERRED_UPDATE if update else DEFERRED_MESSAGE
        body: dict[str, Any] = {"type": kind}
        if not update:
            body["data"] = {"flags": 64}
        return Answer(body, later)

    # -- the command ---------------------------------------------------------------------

    def _command(self, interaction: dict[str, Any], data: dict[str, Any], user: str) -> Answer:
        if data.get("name") != "pizza":
            return _note("Pizza Bot has one command: /pizza.")
        text = ""
        for option in data.get("options") or []:
            if isinstance(option, dict) and option.get("name") == "text":
                text = str(option.get("value") or "")
        key = f"discord:interaction:{interaction.get('id')}" if interaction.get("id") else None
        return self._deferred(interaction, lambda: self.desk.start(text, user=user, key=key))

    # -- buttons -------------------------------------------------------------------------

    async def _component(self, interaction: dict[str, Any], parts: list[str], user: str) -> Answer:
        verb = parts[0]
        if verb == "reply" and len(parts) == 2:
            modal = render.reply_modal(parts[1])
            return (
                Answer({"type": MODAL, "data": modal}) if modal else _note("Reply on the web page.")
            )
        if verb == "pick" and len(parts) == 4:
            return await self._picked(parts, interaction.get("data") or {}, user)
        if verb not in ("approve", "edit", "reject") or len(parts) != 3:
            return _note("This button is not one Pizza Bot knows.")
        item_id, seen = parts[1], parts[2] or None
        if verb == "approve":
            return self._deferred(
                interaction,
                lambda: self.desk.decide(item_id, Approve(), user=user, seen=seen),
                update=True,
            )
        got = await self.desk.openable(item_id, user=user, seen=seen, decision=verb)
        if isinstance(got, str):
            return _note(got)
        if verb == "reject":
            return self._modal(got, render.reject_modal(got))
        fields = edit_fields(got)
        modal = render.edit_modal(got, fields)
        if modal is None and len(fields) > render.MODAL_INPUTS_MAX:
            picker = render.field_picker(got, fields)
            if picker is not None:
                return Answer({"type": MESSAGE, "data": picker})
        return self._modal(got, modal)

    def _modal(self, item: Item, modal: dict[str, Any] | None) -> Answer:
        if modal is None:
            url = f"{self.desk.base_url}/items/{item.id}"
            return _note(f"This form does not fit in Discord: decide on the web page, {url}")
        return Answer({"type": MODAL, "data": modal})

    async def _picked(self, parts: list[str], data: dict[str, Any], user: str) -> Answer:
        """The fields chosen in a form's menu: a modal of those."""
        item_id, seen, shape = parts[1], parts[2], parts[3]
        got = await self.desk.openable(item_id, user=user, seen=seen, decision="edit")
        if isinstance(got, str):
            return _note(got)
        fields = edit_fields(got)
        if render.fields_digest(fields) != shape:
            return _note("This menu is out of date: click Edit again.")
        chosen = sorted({int(v) for v in data.get("values") or [] if str(v).isdigit()})
        return self._modal(got, render.edit_modal(got, fields, chosen))

    # -- modals --------------------------------------------------------------------------

    async def _submitted(
        self, interaction: dict[str, Any], parts: list[str], data: dict[str, Any], user: str
    ) -> Answer:
        values = render.modal_values(data)
        verb = parts[0]
        if verb == "say" and len(parts) == 2:
            text = values.get("text", "").strip()
            run_id = parts[1]
            return self._deferred(
                interaction,
                lambda: self._said(run_id, text, user),
            )
        if verb == "why" and len(parts) == 3:
            reason = values.get("reason", "").strip()
            item_id, seen = parts[1], parts[2]
            return self._deferred(
                interaction,
                lambda: self._decided(item_id, Reject(reason), user, seen, "❌ Rejected."),
            )
        if verb == "form" and len(parts) == 5:
            return await self._form(interaction, parts[1:], values, user)
        return _note("This form is not one Pizza Bot knows.")

    async def _form(
        self, interaction: dict[str, Any], parts: list[str], values: dict[str, str], user: str
    ) -> Answer:
        item_id, seen, shape, which = parts
        got = await self.desk.openable(item_id, user=user, seen=seen, decision="edit")
        if isinstance(got, str):
            return _note(got)
        fields = edit_fields(got)
        again = render.again_button(got.id, seen)
        if render.fields_digest(fields) != shape:
            return _note("This form is out of date: open it again.", again)
        whole = which == "*"
        chosen = range(len(fields)) if whole else [int(i) for i in which.split(".") if i.isdigit()]
        raw: dict[str, str | bool | None] = {
            fields[i].name: values.get(f"f{i}") or None for i in chosen if 0 <= i < len(fields)
        }
        args, errors = edited_args(got, raw, whole=whole)
        if errors:
            return _note("Not applied; the item still waits:\n" + errors_text(errors), again)
        question = got.kind is ItemKind.QUESTION
        done = "✅ Answered." if question else "✏️ Edited: it runs with your arguments."
        return self._deferred(
            interaction, lambda: self._decided(got.id, Edit(args), user, seen, done)
        )

    async def _decided(
        self, item_id: str, decision: Approve | Edit | Reject, user: str, seen: str, done: str
    ) -> str:
        note = await self.desk.decide(item_id, decision, user=user, seen=seen)
        return note or done

    async def _said(self, run_id: str, text: str, user: str) -> str:
        if not text:
            return "Nothing was sent: the message was empty."
        note = await self.desk.follow_up(run_id, text, user=user)
        return note or "Sent to the run."
