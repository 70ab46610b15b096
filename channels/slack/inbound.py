"""What people do in Slack, translated into calls of the engine (`SlackInbound`).

Buttons and modals become `Inbox.decide`, `/pizza`, DMs, @mentions and the Home tab's start
form become `Runs.start`, and a reply in a run's thread becomes `Runs.follow_up`. No rule
lives here: the policy (`pizzabot.agent.policy.Access`) says who may decide, start and follow up, and
its refusals go to the audit trail through `pizzabot.agent.policy.audit_refusal`; the inbox says
whether the first decision already won. This module passes the Slack user id along and
answers in Slack's terms (an ephemeral note, an inline form error).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.agent.argforms import form_fields
from pizzabot.agent.card_digest import card_digest, seen_matches
from pizzabot.agent.errors import (
    AlreadyDecided,
    CardChanged,
    Conflict,
    InvalidArguments,
    NotAllowed,
    NotFound,
    OwnRequest,
    StepUpRequired,
)
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Approve, Decision, Edit, Item, ItemKind, Reject
from pizzabot.agent.policy import SLACK, Access, Principal, Verdict, audit_refusal
from pizzabot.agent.questions import validate_answer
from pizzabot.agent.runs import Runs
from pizzabot.agent.skills import SkillBook
from pizzabot.channels.slack import blocks, grants
from pizzabot.channels.slack.blocks import ModalRef
from pizzabot.channels.slack.cards import read_value
from pizzabot.channels.slack.home import INPUT_BLOCK, SKILL_BLOCK, start_modal, start_values
from pizzabot.channels.slack.payloads import first_input, strip_mention, unescape, where
from pizzabot.channels.slack.ports import SLACK_ERRORS, SlackStore

log = logging.getLogger(__name__)

CHANNEL = SLACK

_NOT_APPROVER = (
    "Only the approvers this skill names for Slack (`approvers.slack`) can decide here, "
    "so nothing was decided."
)
_CHANGED = (
    "This card changed after you saw it (someone edited the call), so nothing was decided. "
    "The card now shows the call as it is: look at it and decide again."
)
_NOT_STARTER = (
    "Only people listed as Slack approvers of some skill (`approvers.slack`) can start "
    "runs from Slack."
)
_NOT_FOLLOWER = "Only this skill's Slack approvers can steer its runs, so the run did not get this."


@dataclass
class SlackInbound:
    """The engine calls behind every Slack listener. `access` answers who may do what;
    `default_skill` is used when a message does not start with a skill's name; `base_url`
    is the web page, for links."""

    inbox: Inbox
    runs: Runs
    store: SlackStore
    skills: SkillBook
    access: Access
    base_url: str
    default_skill: str | None = None
    command: str = "/pizza"

    async def refused(
        self, verdict: Verdict, *, run_id: str | None = None, item_id: str | None = None
    ) -> None:
        """Write a refusal to the audit trail, as every channel does."""
        now = self.inbox.ctx.clock()
        await audit_refusal(self.store, verdict, now=now, run_id=run_id, item_id=item_id)

    async def may_start(self, user: str) -> bool:
        """Whether `user` may start runs from Slack; a refusal is audited."""
        verdict = self.access.may_start(Principal.of(CHANNEL, user))
        if not verdict:
            await self.refused(verdict)
        return verdict.allowed

    def parse(self, text: str) -> tuple[str, str] | str:
        """(skill, input) from "SKILL what to do", or from the default skill; else a hint."""
        text = text.strip()
        first, _, rest = text.partition(" ")
        if first in self.skills:
            return first, rest.strip()
        if self.default_skill:
            return self.default_skill, text
        names = ", ".join(f"`{s.name}`" for s in self.skills.all()) or "none yet"
        return (
            f"Which skill? Start with its name: `{self.command} SKILL what to do`. Skills: {names}."
        )

    def help(self) -> str:
        lines = [f"`{self.command} SKILL what to do` starts a run. Skills:"]
        for skill in self.skills.all():
            lines.append(f"• `{skill.name}` {blocks.esc(skill.description)}".rstrip())
        if self.default_skill:
            lines.append(f"Without a skill name, `{self.default_skill}` runs.")
        lines.append(f"`{self.command} grants` lists the grants you may revoke.")
        return "\n".join(lines)

    # -- replies -------------------------------------------------------------------------

    async def tell(
        self,
        client: AsyncWebClient,
        *,
        channel: str | None,
        user: str,
        text: str,
        thread_ts: str | None = None,
    ) -> None:
        """An ephemeral note only `user` sees, next to where they acted; in their direct
        messages with the app when they acted where no conversation is (the Home tab)."""
        try:
            if channel:
                await client.chat_postEphemeral(
                    channel=channel, user=user, text=text, thread_ts=thread_ts
                )
            else:
                await client.chat_postMessage(channel=user, text=text, unfurl_links=False)
        except SLACK_ERRORS as exc:
            log.warning("slack: could not post a note to %s: %s", user, exc)

    # -- decisions -----------------------------------------------------------------------

    async def decide(
        self,
        client: AsyncWebClient,
        *,
        item_id: str,
        decision: Decision,
        user: str,
        channel: str | None,
        thread_ts: str | None,
        retried: bool,
        seen: str | None = None,
    ) -> None:
        """Decide as the clicker, on the card whose digest is `seen`, and explain a refusal
        to them. The outbox updates every copy (a changed card too: they get the new one)."""
        note: str | None = None
        try:
            await self.inbox.decide(item_id, decision, by=Principal.of(CHANNEL, user), seen=seen)
        except (OwnRequest, StepUpRequired) as exc:  # StepUpRequired: says where to confirm
            note = blocks.esc(str(exc))
        except NotAllowed:
            note = _NOT_APPROVER
        except CardChanged:
            note = _CHANGED
        except AlreadyDecided as exc:
            # Slack re-sent an interaction we already handled: its first try decided.
            note = None if retried else blocks.already_text(exc.item)
        except Conflict as exc:  # counted already: a person approves once
            note = None if retried else blocks.esc(str(exc))
        except InvalidArguments as exc:
            note = f"Nothing was decided: {blocks.esc(str(exc))}"
        except NotFound:
            note = "This item no longer exists."
        if note:
            await self.tell(client, channel=channel, user=user, text=note, thread_ts=thread_ts)

    async def on_approve(
        self, *, body: dict[str, Any], client: AsyncWebClient, retried: bool
    ) -> None:
        channel, thread = where(body)
        item_id, seen = read_value(str(body["actions"][0].get("value") or ""))
        await self.decide(
            client,
            item_id=item_id,
            decision=Approve(),
            user=str(body["user"]["id"]),
            channel=channel,
            thread_ts=thread,
            retried=retried,
            seen=seen,
        )

    async def open_modal(
        self,
        *,
        body: dict[str, Any],
        client: AsyncWebClient,
        make: Callable[[Item, ModalRef], dict[str, Any]],
        decision: str,
    ) -> None:
        """Edit and Reject ask for more in a modal; refuse early whoever could not submit it
        (and audit the refusal, as `Inbox.decide` does for a refused approval)."""
        channel, thread = where(body)
        user = str(body["user"]["id"])
        item_id, seen = read_value(str(body["actions"][0].get("value") or ""))
        try:
            item = await self.store.get_item(item_id)
        except NotFound:
            await self.tell(client, channel=channel, user=user, text="This item no longer exists.")
            return
        verdict = self.access.may_decide(Principal.of(CHANNEL, user), item)
        if not verdict:
            await audit_refusal(
                self.store,
                verdict,
                now=self.inbox.ctx.clock(),
                run_id=item.run_id,
                item_id=item.id,
                detail={"decision": decision},
            )
            await self.tell(
                client, channel=channel, user=user, text=_NOT_APPROVER, thread_ts=thread
            )
            return
        if item.decided:
            text = blocks.already_text(item)
            await self.tell(client, channel=channel, user=user, text=text, thread_ts=thread)
            return
        if not seen_matches(item, seen):
            # Clicked on a card that no longer shows the item: it is shown anew, not opened.
            await self.store.show_again(item.id, now=self.inbox.ctx.clock())
            self.inbox.ctx.wake_outbox()
            await self.tell(client, channel=channel, user=user, text=_CHANGED, thread_ts=thread)
            return
        view = make(item, ModalRef(item.id, channel, thread, seen=card_digest(item)))
        try:
            await client.views_open(trigger_id=body["trigger_id"], view=view)
        except SLACK_ERRORS as exc:
            log.warning("slack: views.open failed for item %s: %s", item.id, exc)
            url = blocks.item_url(self.base_url, item)
            text = f"Slack would not open the form; decide on the web page instead: <{url}>"
            await self.tell(client, channel=channel, user=user, text=text, thread_ts=thread)

    async def on_edit_submit(
        self,
        *,
        ack: AsyncAck,
        body: dict[str, Any],
        view: dict[str, Any],
        client: AsyncWebClient,
        retried: bool,
    ) -> None:
        ref = ModalRef.loads(str(view.get("private_metadata") or ""))
        user = str(body["user"]["id"])
        try:
            item = await self.store.get_item(ref.item_id)
        except NotFound:
            await ack(response_action="errors", errors={first_input(view): "This item is gone."})
            return
        if item.decided and not retried:
            text = blocks.already_text(item, plain=True)
            await ack(response_action="errors", errors={first_input(view): text})
            return
        schema = item.schema or {}
        fields = form_fields(schema, item.args or {})
        if ref.fields != blocks.fields_digest(fields):
            # Built from another field list (an older modal): its block ids mean other fields.
            text = "This form is out of date: close it and open it again."
            await ack(response_action="errors", errors={first_input(view): text})
            return
        state = (view.get("state") or {}).get("values") or {}
        args, errors = blocks.submitted_args(schema, fields, state)
        if not errors and item.kind is ItemKind.QUESTION:
            errors = validate_answer(schema, args)  # an answer's formats too, on their fields
        if errors:
            await ack(response_action="errors", errors=blocks.form_errors(errors, fields))
            return
        await ack()
        await self.decide(
            client,
            item_id=item.id,
            decision=Edit(args),
            user=user,
            channel=ref.channel,
            thread_ts=ref.thread_ts,
            retried=retried,
            seen=ref.seen,
        )

    async def on_reject_submit(
        self, *, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient, retried: bool
    ) -> None:
        ref = ModalRef.loads(str(view.get("private_metadata") or ""))
        reason = blocks.reason_value((view.get("state") or {}).get("values") or {})
        await self.decide(
            client,
            item_id=ref.item_id,
            decision=Reject(reason),
            user=str(body["user"]["id"]),
            channel=ref.channel,
            thread_ts=ref.thread_ts,
            retried=retried,
            seen=ref.seen,
        )

    # -- the Home tab --------------------------------------------------------------------

    async def on_start_click(self, *, body: dict[str, Any], client: AsyncWebClient) -> None:
        """ "Start a run" in the Home tab: the skill picker, for people who may start runs."""
        user = str(body["user"]["id"])
        if not await self.may_start(user):
            await self.tell(client, channel=None, user=user, text=_NOT_STARTER)
            return
        skills = [(s.name, s.description) for s in self.skills.all()]
        if not skills:
            await self.tell(client, channel=None, user=user, text="No skills are loaded yet.")
            return
        try:
            await client.views_open(trigger_id=body["trigger_id"], view=start_modal(skills))
        except SLACK_ERRORS as exc:
            log.warning("slack: views.open failed for the start form: %s", exc)

    async def on_start_submit(
        self, *, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        user = str(body["user"]["id"])
        skill, text = start_values((view.get("state") or {}).get("values") or {})
        errors: dict[str, str] = {}
        verdict = self.access.may_start(Principal.of(CHANNEL, user), skill)
        if not verdict:
            errors[SKILL_BLOCK] = _NOT_STARTER.replace("`", "")
        elif skill not in self.skills:
            errors[SKILL_BLOCK] = "Pick one of the skills."
        if not text:
            errors[INPUT_BLOCK] = "Say what the run should do."
        if errors:
            await ack(response_action="errors", errors=errors)
            if not verdict:
                await self.refused(verdict)
            return
        await ack()
        key = f"slack:view:{view['id']}" if view.get("id") else None
        reply = await self.start(skill, text, user=user, key=key)
        await self.tell(client, channel=None, user=user, text=reply)

    # -- starting and following up -------------------------------------------------------

    async def start(self, skill: str, text: str, *, user: str, key: str | None) -> str:
        """Start a run; the sentence to answer with."""
        try:
            run = await self.runs.start(
                skill, text, trigger="slack", by=Principal.of(CHANNEL, user), idempotency_key=key
            )
        except Conflict as exc:  # the kill switch
            return blocks.esc(str(exc))
        except NotFound as exc:
            return blocks.esc(str(exc))
        where = ""
        target = self.skills.get(skill).deliver.slack if skill in self.skills else None
        if target:
            mention = f"<@{target}>" if target[:1] in {"U", "W"} else f"<#{target}>"
            where = f" Its questions and result go to {mention}."
        url = blocks.run_url(self.base_url, run.id)
        return f"Started run <{url}|{run.id}> of *{blocks.esc(skill)}*.{where}"

    async def on_command(
        self, *, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond
    ) -> None:
        user = str(command.get("user_id") or "")
        text = unescape(str(command.get("text") or "")).strip()
        verdict = self.access.may_start(Principal.of(CHANNEL, user))
        if not verdict:
            await ack(text=_NOT_STARTER, response_type="ephemeral")
            await self.refused(verdict)
            return
        if not text or text == "help":
            await ack(text=self.help(), response_type="ephemeral")
            return
        if text == "grants":
            await ack(**await grants.grants_reply(self, user))
            return
        parsed = self.parse(text)
        if isinstance(parsed, str):
            await ack(text=parsed, response_type="ephemeral")
            return
        await ack()
        key = f"slack:command:{command.get('trigger_id')}" if command.get("trigger_id") else None
        reply = await self.start(parsed[0], parsed[1], user=user, key=key)
        try:
            await respond(text=reply, response_type="ephemeral")
        except SLACK_ERRORS as exc:
            log.warning("slack: could not answer %s: %s", self.command, exc)

    async def start_from_message(
        self,
        client: AsyncWebClient,
        *,
        event: dict[str, Any],
        text: str,
        key: str | None,
        reply_in_thread: bool,
    ) -> None:
        user, channel = str(event.get("user")), str(event.get("channel") or "")
        thread = str(event.get("thread_ts") or event.get("ts")) if reply_in_thread else None
        if not await self.may_start(user):
            await self.tell(client, channel=channel, user=user, text=_NOT_STARTER, thread_ts=thread)
            return
        parsed = self.parse(text)
        if isinstance(parsed, str):
            await self.tell(client, channel=channel, user=user, text=parsed, thread_ts=thread)
            return
        reply = await self.start(parsed[0], parsed[1], user=user, key=key)
        try:
            await client.chat_postMessage(channel=channel, text=reply, thread_ts=thread)
        except SLACK_ERRORS as exc:
            log.warning("slack: could not answer a message from %s: %s", user, exc)

    async def run_of_thread(self, thread_ts: str | None) -> str | None:
        """The run whose messages live in the thread under `thread_ts`, if any."""
        if not thread_ts:
            return None
        delivery = await self.store.find_delivery(CHANNEL, thread_ts)
        return delivery.run_id if delivery is not None else None

    async def follow_up(
        self, client: AsyncWebClient, *, run_id: str, event: dict[str, Any], text: str
    ) -> None:
        user, channel = str(event.get("user")), str(event.get("channel") or "")
        thread = str(event.get("thread_ts"))
        run = await self.store.get_run(run_id)
        verdict = self.access.may_follow_up(Principal.of(CHANNEL, user), run.skill)
        if not verdict:
            await self.refused(verdict, run_id=run.id)
            await self.tell(
                client, channel=channel, user=user, text=_NOT_FOLLOWER, thread_ts=thread
            )
            return
        try:
            await self.runs.follow_up(run_id, text, by=Principal.of(CHANNEL, user))
        except Conflict as exc:
            note = f"The run did not get this: {blocks.esc(str(exc))}"
            await self.tell(client, channel=channel, user=user, text=note, thread_ts=thread)

    async def on_mention(
        self,
        *,
        event: dict[str, Any],
        body: dict[str, Any],
        client: AsyncWebClient,
        bot: str | None,
    ) -> None:
        if event.get("bot_id") or not event.get("user"):
            return
        if await self.run_of_thread(event.get("thread_ts")):
            return  # a reply in a run's thread: the message listener sends it to the run
        text = strip_mention(str(event.get("text") or ""), bot)
        key = f"slack:event:{body['event_id']}" if body.get("event_id") else None
        await self.start_from_message(client, event=event, text=text, key=key, reply_in_thread=True)

    async def on_message(
        self,
        *,
        event: dict[str, Any],
        body: dict[str, Any],
        client: AsyncWebClient,
        bot: str | None,
    ) -> None:
        # Edits, joins and bots' own posts (ours included) are not someone talking to us.
        if event.get("subtype") or event.get("bot_id") or not event.get("user"):
            return
        text = strip_mention(str(event.get("text") or ""), bot)
        thread, ts = event.get("thread_ts"), event.get("ts")
        if thread and thread != ts:
            run_id = await self.run_of_thread(str(thread))
            if run_id is not None:
                await self.follow_up(client, run_id=run_id, event=event, text=text)
                return
        if event.get("channel_type") == "im":
            key = f"slack:event:{body['event_id']}" if body.get("event_id") else None
            await self.start_from_message(
                client, event=event, text=text, key=key, reply_in_thread=bool(thread)
            )
