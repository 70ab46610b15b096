"""The Bolt app: Slack's listeners, each handing its payload to `SlackInbound`.

Opening the Home tab publishes it (`pizzabot.channels.slack.home`); everything else is translated into
engine calls by `pizzabot.channels.slack.inbound`.

Slack's own rules: every interaction is acknowledged at once and the work happens after the
ack (Bolt answers the HTTP request when `ack()` is called), except a modal submission, whose
ack must carry the form errors, so it is checked first (in memory) and acked with them.
Event retries are dropped (the first delivery was already handled); a retried interaction is
harmless because the first decision wins.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from pizzabot.channels.slack import blocks, grants, questions, undo
from pizzabot.channels.slack.batch import APPROVE_ALL, on_approve_all
from pizzabot.channels.slack.home import START, START_VIEW, HomeTabs
from pizzabot.channels.slack.inbound import SlackInbound
from pizzabot.channels.slack.ports import SLACK_ERRORS

log = logging.getLogger(__name__)


def _retried(request: AsyncBoltRequest) -> bool:
    # Socket Mode sends retry_attempt 0 on a first delivery; only 1 and up are retries.
    values = request.headers.get("x-slack-retry-num") or []
    value = values[0] if isinstance(values, list | tuple) and values else values
    try:
        return int(str(value or 0)) > 0
    except ValueError:
        return True


async def _skip_event_retries(
    body: dict[str, Any], request: AsyncBoltRequest, next: Callable[[], Awaitable[None]]
) -> BoltResponse | None:
    """Slack re-sends an event it thinks we missed; the first one was handled (or is being
    handled), so a retry must not start a second run or send a second follow-up."""
    if body.get("type") == "event_callback" and _retried(request):
        return BoltResponse(status=200, body="")
    await next()
    return None


class _Listeners:
    """Each Bolt listener hands its payload to `SlackInbound`. Bolt injects a listener's
    arguments by parameter name (and skips `self`), so the names below are Bolt's."""

    def __init__(self, inbound: SlackInbound, tabs: HomeTabs) -> None:
        self.inbound = inbound
        self.tabs = tabs

    async def approve(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, request: AsyncBoltRequest
    ) -> None:
        await ack()
        await self.inbound.on_approve(body=body, client=client, retried=_retried(request))

    async def approve_all(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, request: AsyncBoltRequest
    ) -> None:
        await ack()
        await on_approve_all(self.inbound, body=body, client=client, retried=_retried(request))

    async def edit(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        base = self.inbound.base_url
        await self.inbound.open_modal(
            body=body,
            client=client,
            make=lambda i, r: blocks.edit_modal(i, ref=r, base_url=base),
            decision="edit",
        )

    async def reject(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        await self.inbound.open_modal(
            body=body,
            client=client,
            make=lambda i, r: blocks.reject_modal(i, ref=r),
            decision="reject",
        )

    async def answer(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        base = self.inbound.base_url
        await self.inbound.open_modal(
            body=body,
            client=client,
            make=lambda i, r: questions.answer_modal(i, ref=r, base_url=base),
            decision="edit",
        )

    async def decline(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        await self.inbound.open_modal(
            body=body,
            client=client,
            make=lambda i, r: questions.decline_modal(i, ref=r),
            decision="reject",
        )

    async def open_link(self, ack: AsyncAck) -> None:
        # Slack opened the page itself; it still tells the app, which must acknowledge.
        await ack()

    async def edit_submit(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        view: dict[str, Any],
        client: AsyncWebClient,
        request: AsyncBoltRequest,
    ) -> None:
        await self.inbound.on_edit_submit(
            ack=ack, body=body, view=view, client=client, retried=_retried(request)
        )

    async def reject_submit(
        self,
        ack: AsyncAck,
        body: dict[str, Any],
        view: dict[str, Any],
        client: AsyncWebClient,
        request: AsyncBoltRequest,
    ) -> None:
        await ack()
        await self.inbound.on_reject_submit(
            body=body, view=view, client=client, retried=_retried(request)
        )

    async def grant(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, request: AsyncBoltRequest
    ) -> None:
        await ack()
        await grants.on_grant(self.inbound, body=body, client=client, retried=_retried(request))

    async def revoke_grant(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await ack()
        await grants.on_revoke(self.inbound, body=body, client=client)

    async def undo(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient, request: AsyncBoltRequest
    ) -> None:
        await ack()
        await undo.on_undo(self.inbound, body=body, client=client, retried=_retried(request))

    async def command(self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await self.inbound.on_command(ack=ack, command=command, respond=respond)

    async def mention(
        self, event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: Any
    ) -> None:
        bot = context.get("bot_user_id")
        await self.inbound.on_mention(event=event, body=body, client=client, bot=bot)

    async def message(
        self, event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient, context: Any
    ) -> None:
        bot = context.get("bot_user_id")
        await self.inbound.on_message(event=event, body=body, client=client, bot=bot)

    async def home_opened(self, event: dict[str, Any]) -> None:
        if event.get("tab", "home") != "home" or not event.get("user"):
            return
        try:
            await self.tabs.opened(str(event["user"]), published_before=bool(event.get("view")))
        except SLACK_ERRORS as exc:
            log.warning("slack: could not publish a Home tab: %s", exc)

    async def start_clicked(
        self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await ack()
        await self.inbound.on_start_click(body=body, client=client)

    async def start_submit(
        self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await self.inbound.on_start_submit(ack=ack, body=body, view=view, client=client)


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
        logger=logging.getLogger("pizzabot.channels.slack.bolt"),
    )
    app.middleware(_skip_event_retries)
    on = _Listeners(inbound, tabs)
    app.event("app_home_opened")(on.home_opened)
    app.action(START)(on.start_clicked)
    app.view(START_VIEW)(on.start_submit)
    app.action(blocks.APPROVE)(on.approve)
    app.action(APPROVE_ALL)(on.approve_all)
    app.action(blocks.EDIT)(on.edit)
    app.action(blocks.REJECT)(on.reject)
    app.action(questions.ANSWER)(on.answer)
    app.action(questions.DECLINE)(on.decline)
    app.action(questions.OPEN_LINK)(on.open_link)
    app.action(blocks.GRANT)(on.grant)
    app.action(blocks.REVOKE_GRANT)(on.revoke_grant)
    app.action(undo.UNDO)(on.undo)
    app.view(blocks.EDIT_VIEW)(on.edit_submit)
    app.view(blocks.REJECT_VIEW)(on.reject_submit)
    app.command(inbound.command)(on.command)
    app.event("app_mention")(on.mention)
    app.event("message")(on.message)
    return app
