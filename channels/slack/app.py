"""The Bolt app: what people do in Slack, translated into calls of the engine.

Buttons and modals become `Inbox.decide`, `/pizza`, DMs, @mentions and the Home tab's start
form become `Runs.start`, and a reply in a run's thread becomes `Runs.follow_up`; opening the
Home tab publishes it (`channels.slack.home`). No rule lives here: the inbox decides who may
decide and whether the first decision already won; this module only answers in Slack's terms
(an ephemeral note, an inline form error).

Slack's own rules: every interaction is acknowledged at once and the work happens after the
ack (Bolt answers the HTTP request when `ack()` is called), except a modal submission, whose
ack must carry the form errors, so it is checked first (in memory) and acked with them.
Event retries are dropped (the first delivery was already handled); a retried interaction is
harmless because the first decision wins.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import aiohttp
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent.argforms import form_fields
from agent.errors import AlreadyDecided, Conflict, InvalidArguments, NotAllowed, NotFound
from agent.inbox import Inbox
from agent.model import Approve, Box, Decision, Delivery, Edit, Item, ItemStatus, Reject, Run
from agent.runs import Runs
from agent.skills import SkillBook
from channels.slack import blocks
from channels.slack.blocks import ModalRef
from channels.slack.home import (
    INPUT_BLOCK,
    SKILL_BLOCK,
    START,
    START_VIEW,
    HomeTabs,
    start_modal,
    start_values,
)

log = logging.getLogger(__name__)

CHANNEL = "slack"

_NOT_APPROVER = (
    "Only the approvers this skill names for Slack (`approvers.slack`) can decide here, "
    "so nothing was decided."
)
_NOT_STARTER = (
    "Only people listed as Slack approvers of some skill (`approvers.slack`) can start "
    "runs from Slack."
)
_SLACK_ERRORS = (SlackApiError, aiohttp.ClientError, TimeoutError)


class SlackStore(Protocol):
    """What the Slack side reads from the store."""

    async def get_item(self, item_id: str) -> Item: ...

    async def get_run(self, run_id: str) -> Run: ...

    async def find_delivery(self, channel: str, external_id: str) -> Delivery | None: ...

    async def list_items(
        self,
        *,
        box: Box | None = None,
        status: ItemStatus | None = None,
        run_id: str | None = None,
        limit: int = 200,
    ) -> list[Item]: ...

    async def audit(
        self,
        *,
        action: str,
        actor: str,
        channel: str,
        now: datetime,
        run_id: str | None = None,
        item_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None: ...


def _unescape(text: str) -> str:
    # Slack escapes these three in message text; the run should read what the person typed.
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _where(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """The conversation and thread a button was clicked in."""
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
    thread = (body.get("message") or {}).get("thread_ts") or container.get("thread_ts")
    return channel, thread


def _retried(request: AsyncBoltRequest) -> bool:
    # Socket Mode sends retry_attempt 0 on a first delivery; only 1 and up are retries.
    values = request.headers.get("x-slack-retry-num") or []
    value = values[0] if isinstance(values, list | tuple) and values else values
    try:
        return int(str(value or 0)) > 0
    except ValueError:
        return True


def _first_input(view: dict[str, Any]) -> str:
    for block in view.get("blocks") or []:
        if block.get("type") == "input" and block.get("block_id"):
            return str(block["block_id"])
    return ""


@dataclass
class SlackInbound:
    """The engine calls behind every Slack listener. `default_skill` is used when a message
    does not start with a skill's name; `base_url` is the web page, for links."""

    inbox: Inbox
    runs: Runs
    store: SlackStore
    skills: SkillBook
    base_url: str
    default_skill: str | None = None
    command: str = "/pizza"

    # -- who may do what -----------------------------------------------------------------

    def starters(self) -> set[str]:
        """Who may start runs from Slack: anyone who approves some skill on Slack (fail
        closed: no approvers anywhere, nobody)."""
        return {user for skill in self.skills.all() for user in skill.approvers.slack}

    def may_decide(self, item: Item, user: str) -> bool:
        """The rule the cards' buttons meet: the inbox's, for Slack."""
        return self.inbox.may_decide(item, actor=user, channel=CHANNEL)

    def follows(self, item: Item, user: str) -> bool:
        """Whether `user` is someone an Unread item of its skill is for: the skill's Slack
        approvers, and the person it delivers to."""
        skill = self.skills.get(item.skill) if item.skill in self.skills else None
        if skill is None:
            return False
        return user in skill.approvers_for(None, CHANNEL) or skill.deliver.slack == user

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
        except _SLACK_ERRORS as exc:
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
    ) -> None:
        """Decide, and explain a refusal to the clicker. The outbox updates every copy."""
        note: str | None = None
        try:
            await self.inbox.decide(item_id, decision, actor=user, channel=CHANNEL)
        except NotAllowed:
            note = _NOT_APPROVER
        except AlreadyDecided as exc:
            # Slack re-sent an interaction we already handled: its first try decided.
            note = None if retried else blocks.already_text(exc.item)
        except InvalidArguments as exc:
            note = f"Nothing was decided: {blocks.esc(str(exc))}"
        except NotFound:
            note = "This item no longer exists."
        if note:
            await self.tell(client, channel=channel, user=user, text=note, thread_ts=thread_ts)

    async def on_approve(
        self, *, body: dict[str, Any], client: AsyncWebClient, retried: bool
    ) -> None:
        channel, thread = _where(body)
        await self.decide(
            client,
            item_id=str(body["actions"][0].get("value") or ""),
            decision=Approve(),
            user=str(body["user"]["id"]),
            channel=channel,
            thread_ts=thread,
            retried=retried,
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
        channel, thread = _where(body)
        user = str(body["user"]["id"])
        item_id = str(body["actions"][0].get("value") or "")
        try:
            item = await self.store.get_item(item_id)
        except NotFound:
            await self.tell(client, channel=channel, user=user, text="This item no longer exists.")
            return
        if not self.inbox.may_decide(item, actor=user, channel=CHANNEL):
            await self.store.audit(
                action="decision_refused",
                actor=user,
                channel=CHANNEL,
                now=self.inbox.ctx.clock(),
                run_id=item.run_id,
                item_id=item.id,
                detail={"decision": decision, "why": "not an approver for this channel"},
            )
            await self.tell(
                client, channel=channel, user=user, text=_NOT_APPROVER, thread_ts=thread
            )
            return
        if item.decided:
            text = blocks.already_text(item)
            await self.tell(client, channel=channel, user=user, text=text, thread_ts=thread)
            return
        view = make(item, ModalRef(item.id, channel, thread))
        try:
            await client.views_open(trigger_id=body["trigger_id"], view=view)
        except _SLACK_ERRORS as exc:
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
            await ack(response_action="errors", errors={_first_input(view): "This item is gone."})
            return
        if item.decided and not retried:
            text = blocks.already_text(item, plain=True)
            await ack(response_action="errors", errors={_first_input(view): text})
            return
        schema = item.schema or {}
        fields = form_fields(schema, item.args or {})
        if ref.fields != blocks.fields_digest(fields):
            # Built from another field list (an older modal): its block ids mean other fields.
            text = "This form is out of date: close it and press Edit again."
            await ack(response_action="errors", errors={_first_input(view): text})
            return
        state = (view.get("state") or {}).get("values") or {}
        args, errors = blocks.submitted_args(schema, fields, state)
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
        )

    # -- the Home tab --------------------------------------------------------------------

    async def on_start_click(self, *, body: dict[str, Any], client: AsyncWebClient) -> None:
        """ "Start a run" in the Home tab: the skill picker, for people who may start runs."""
        user = str(body["user"]["id"])
        if user not in self.starters():
            await self.tell(client, channel=None, user=user, text=_NOT_STARTER)
            return
        skills = [(s.name, s.description) for s in self.skills.all()]
        if not skills:
            await self.tell(client, channel=None, user=user, text="No skills are loaded yet.")
            return
        try:
            await client.views_open(trigger_id=body["trigger_id"], view=start_modal(skills))
        except _SLACK_ERRORS as exc:
            log.warning("slack: views.open failed for the start form: %s", exc)

    async def on_start_submit(
        self, *, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        user = str(body["user"]["id"])
        skill, text = start_values((view.get("state") or {}).get("values") or {})
        errors: dict[str, str] = {}
        if user not in self.starters():
            errors[SKILL_BLOCK] = _NOT_STARTER.replace("`", "")
        elif skill not in self.skills:
            errors[SKILL_BLOCK] = "Pick one of the skills."
        if not text:
            errors[INPUT_BLOCK] = "Say what the run should do."
        if errors:
            await ack(response_action="errors", errors=errors)
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
                skill, text, trigger="slack", actor=user, idempotency_key=key
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
        text = _unescape(str(command.get("text") or "")).strip()
        if user not in self.starters():
            await ack(text=_NOT_STARTER, response_type="ephemeral")
            return
        if not text or text == "help":
            await ack(text=self.help(), response_type="ephemeral")
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
        except _SLACK_ERRORS as exc:
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
        if user not in self.starters():
            await self.tell(client, channel=channel, user=user, text=_NOT_STARTER, thread_ts=thread)
            return
        parsed = self.parse(text)
        if isinstance(parsed, str):
            await self.tell(client, channel=channel, user=user, text=parsed, thread_ts=thread)
            return
        reply = await self.start(parsed[0], parsed[1], user=user, key=key)
        try:
            await client.chat_postMessage(channel=channel, text=reply, thread_ts=thread)
        except _SLACK_ERRORS as exc:
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
        skill = self.skills.get(run.skill) if run.skill in self.skills else None
        if skill is None or user not in skill.approvers.slack:
            note = (
                "Only this skill's Slack approvers can steer its runs, so the run did not get this."
            )
            await self.tell(client, channel=channel, user=user, text=note, thread_ts=thread)
            return
        try:
            await self.runs.follow_up(run_id, text, actor=user, channel=CHANNEL)
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
        text = _strip_mention(str(event.get("text") or ""), bot)
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
        text = _strip_mention(str(event.get("text") or ""), bot)
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


def _strip_mention(text: str, bot: str | None) -> str:
    # Without the bot's id (auth.test not answered yet), drop a leading mention.
    text = text.replace(f"<@{bot}>", " ") if bot else re.sub(r"^\s*<@[A-Z0-9]+>", " ", text)
    return _unescape(" ".join(text.split()))


async def _skip_event_retries(
    body: dict[str, Any], request: AsyncBoltRequest, next: Callable[[], Awaitable[None]]
) -> BoltResponse | None:
    """Slack re-sends an event it thinks we missed; the first one was handled (or is being
    handled), so a retry must not start a second run or send a second follow-up."""
    if body.get("type") == "event_callback" and _retried(request):
        return BoltResponse(status=200, body="")
    await next()
    return None


def build_app(
    *,
    client: AsyncWebClient,
    signing_secret: str,
    inbound: SlackInbound,
    home: HomeTabs | None = None,
) -> AsyncApp:
    """The Bolt app, with its listeners. Serve it with Bolt's FastAPI handler (HTTP mode) or
    its Socket Mode handler; Bolt checks every HTTP request's signature and age. `home`
    publishes the Home tab (one that only answers openings when none is given)."""
    tabs = home or HomeTabs(client=client, inbound=inbound)
    app = AsyncApp(
        client=client,
        signing_secret=signing_secret,
        name="pizzabot",
        logger=logging.getLogger("channels.slack.bolt"),
    )
    app.middleware(_skip_event_retries)

    # Bolt injects listener arguments by parameter name, so these are plain functions.
    async def approve(
        ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, request: AsyncBoltRequest
    ) -> None:
        await ack()
        await inbound.on_approve(body=body, client=client, retried=_retried(request))

    async def edit(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        base = inbound.base_url
        await inbound.open_modal(
            body=body,
            client=client,
            make=lambda i, r: blocks.edit_modal(i, ref=r, base_url=base),
            decision="edit",
        )

    async def reject(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        await inbound.open_modal(
            body=body,
            client=client,
            make=lambda i, r: blocks.reject_modal(i, ref=r),
            decision="reject",
        )

    async def edit_submit(
        ack: AsyncAck,
        body: dict[str, Any],
        view: dict[str, Any],
        client: AsyncWebClient,
        request: AsyncBoltRequest,
    ) -> None:
        await inbound.on_edit_submit(
            ack=ack, body=body, view=view, client=client, retried=_retried(request)
        )

    async def reject_submit(
        ack: AsyncAck,
        body: dict[str, Any],
        view: dict[str, Any],
        client: AsyncWebClient,
        request: AsyncBoltRequest,
    ) -> None:
        await ack()
        await inbound.on_reject_submit(
            body=body, view=view, client=client, retried=_retried(request)
        )

    async def command(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await inbound.on_command(ack=ack, command=command, respond=respond)

    async def mention(
        event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: Any
    ) -> None:
        await inbound.on_mention(
            event=event, body=body, client=client, bot=context.get("bot_user_id")
        )

    async def message(
        event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: Any
    ) -> None:
        await inbound.on_message(
            event=event, body=body, client=client, bot=context.get("bot_user_id")
        )

    async def home_opened(event: dict[str, Any]) -> None:
        if event.get("tab", "home") != "home" or not event.get("user"):
            return
        try:
            await tabs.opened(str(event["user"]), published_before=bool(event.get("view")))
        except _SLACK_ERRORS as exc:
            log.warning("slack: could not publish a Home tab: %s", exc)

    async def start_clicked(ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        await inbound.on_start_click(body=body, client=client)

    async def start_submit(
        ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await inbound.on_start_submit(ack=ack, body=body, view=view, client=client)

    app.event("app_home_opened")(home_opened)
    app.action(START)(start_clicked)
    app.view(START_VIEW)(start_submit)
    app.action(blocks.APPROVE)(approve)
    app.action(blocks.EDIT)(edit)
    app.action(blocks.REJECT)(reject)
    app.view(blocks.EDIT_VIEW)(edit_submit)
    app.view(blocks.REJECT_VIEW)(reject_submit)
    app.command(inbound.command)(command)
    app.event("app_mention")(mention)
    app.event("message")(message)
    return app
