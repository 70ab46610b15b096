"""A running tool call asks a person, and waits for the answer.

An MCP server may ask for input in the middle of a tool call (elicitation). The call is in
flight, so the run cannot be parked as rows the way an approval parks it: the run stays
RUNNING, held by its worker (the worker's heartbeat keeps the lease), and the call waits. The
question becomes an Action item of kind QUESTION (`pizzabot.agent.questions`) with its deliveries, in
one transaction with a note on the run's log; the wait sleeps on the decision bell
(`ctx.decisions`), so an answer from any channel, in this process or (PostgreSQL) another,
wakes it at once.

The wait ends when the item is decided, or after the tool's `timeout` in the skill (else
`DEFAULT_TIMEOUT`): then the item expires like an unanswered approval and the tool is told
"cancel". When the wait is given up (the call that asked ended: its run was cancelled or
killed, its transport dropped), the item is closed as cancelled at once (`close_question`),
before the server hears "cancel": a card never offers to answer a call that is gone. A question this server cannot draw (`check_schema`) or a
link that is not http(s) is answered "cancel" at once, with the reason on the run's log.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from pizzabot.agent.context import Context
from pizzabot.agent.errors import AlreadyDecided
from pizzabot.agent.events import DecisionMade, NewEvent, Note, QuestionRemark
from pizzabot.agent.held import HeldRun
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Box, Expired, Item, ItemKind, ItemStatus, Risk
from pizzabot.agent.questions import (
    MAX_URL,
    Answer,
    Question,
    answer_of,
    check_schema,
    link_refusal,
    with_defaults,
)
from pizzabot.agent.targets import targets_for
from pizzabot.agent.timers import human_duration

__all__ = ["DEFAULT_TIMEOUT", "MAX_MESSAGE", "Asker", "close_question", "refusal"]

log = logging.getLogger(__name__)

#: How long a running tool waits for an answer when its skill sets no `timeout` for it: the
#: worker holds the run (and a tool call stays open) meanwhile, so not for ever.
DEFAULT_TIMEOUT = 3600.0
MAX_MESSAGE = 4000


class Asker:
    """The questions of one tool call of a held run. `ask` is what `pizzabot.agent.tools.Tools.call`
    hands to a tool that asks for input (an MCP server that elicits)."""

    def __init__(
        self, ctx: Context, held: HeldRun, *, call_id: str, tool: str, timeout: float | None = None
    ) -> None:
        self.ctx = ctx
        self.held = held
        self.call_id = call_id
        self.tool = tool
        rule = held.skill.rule(tool)
        self.timeout = timeout or rule.timeout or DEFAULT_TIMEOUT
        #: Why a question is closed when what asked it ends first (its card says it).
        self.ended = "the tool call that asked ended"

    async def ask(self, question: Question) -> Answer:
        """Ask, wait, and say the answer as MCP does (accept with values, decline, cancel)."""
        why = refusal(question)
        if why is not None:
            await self._note(question, refused=why)
            return Answer("cancel")
        item = await self._create(question)
        try:
            decided = await self.ctx.decisions.until(
                lambda: self._decided(item.id), self.timeout, run_id=item.run_id
            )
        except asyncio.CancelledError:
            # Shielded: the item is closed even if the closing is interrupted in turn.
            await asyncio.shield(close_question(self.ctx, item, reason=self.ended))
            raise
        if decided is None:
            decided = await self._expire(item.id)
        return answer_of(decided) or Answer("cancel")

    async def _decided(self, item_id: str) -> Item | None:
        item = await self.ctx.store.get_item(item_id)
        return item if item.status is not ItemStatus.PENDING else None

    async def _expire(self, item_id: str) -> Item:
        reason = f"no one answered within {human_duration(self.timeout)}"
        try:
            return await Inbox(self.ctx).expire(item_id, reason=reason)
        except AlreadyDecided as exc:  # answered just as the time ran out: the answer wins
            return exc.item

    async def _note(self, question: Question, *, refused: str) -> None:
        log.info(
            "run %s: %s asked a question that was refused: %s", self.held.run.id, self.tool, refused
        )
        remark = QuestionRemark(
            call_id=self.call_id,
            tool=self.tool,
            message=question.message[:MAX_MESSAGE],
            url=question.url[:MAX_URL] if question.url else None,
            refused=refused,
        )
        await self.held.append(self.ctx, [NewEvent(Note(question=remark))])

    async def _create(self, question: Question) -> Item:
        now = self.ctx.clock()
        item = self._item(question, now)
        remark = QuestionRemark(
            call_id=self.call_id,
            tool=self.tool,
            message=item.body,
            item_id=item.id,
            url=question.url,
        )
        created = await self.ctx.store.create_items(
            [(item, [NewEvent(Note(question=remark))])],
            targets=targets_for(self.held.skill, self.ctx.channels),
            lease=self.held.lease,
            now=now,
        )
        self.ctx.wake_outbox()
        return created[0]

    def _item(self, question: Question, now: datetime) -> Item:
        run, skill = self.held.run, self.held.skill
        message = question.message.strip()[:MAX_MESSAGE] or f"{self.tool} asks for input"
        first = message.splitlines()[0][:80]
        link = question.url is not None
        return Item(
            id=self.ctx.ids(),
            run_id=run.id,
            skill=skill.name,
            box=Box.ACTION,
            kind=ItemKind.QUESTION,
            status=ItemStatus.PENDING,
            title=f"{self.tool} asks: {first}",
            body=message,
            created_at=now,
            call_id=self.call_id,
            tool=self.tool,
            # The asker's defaults are the proposal: every card shows them, and accepting
            # the proposal (a mail's "ok") answers with them.
            args={"url": question.url}
            if link
            else with_defaults(question.schema, question.proposed),
            schema=None if link else question.schema,
            risk=Risk(),
            secret=self.ctx.secrets(),
        )


async def close_question(ctx: Context, item: Item, *, reason: str) -> Item | None:
    """Close a question no one answered because the call that asked is gone: status
    CANCELLED, the closing on the run's log, the cards updated. None when it was decided
    first (the decision stands)."""
    gone = Expired(reason=reason)
    event = NewEvent(
        DecisionMade(
            item_id=item.id, call_id=item.call_id, decision=gone, actor="engine", channel="engine"
        )
    )
    try:
        closed = await ctx.store.record_decision(
            item.id,
            gone,
            actor="engine",
            channel="engine",
            now=ctx.clock(),
            final_args=None,
            event=event,
            status=ItemStatus.CANCELLED,
        )
    except AlreadyDecided:
        return None
    ctx.wake_outbox()
    return closed


def refusal(question: Question) -> str | None:
    """Why a question cannot be put to a person (None: it can)."""
    if question.url is not None:
        return link_refusal(question.url)
    return check_schema(question.schema)
