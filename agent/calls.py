"""Carrying out a run's tool calls: what `pizzabot.agent.settle.plan` decides for each call the model
made, done against the store, the tool servers and the grants.

Its own module because it is most of a step and apart from the loop around it: `Runner` in
`pizzabot.agent.engine` decides *when* a call is settled (pending calls first, then the model), and
holds a `CallSteps`, which decides *how* — run it, tell the model why not, or put it on a card
and park the run. A call's plan may end the run: `CallSteps` is given the runner's way to end
one (`Finish`), and knows nothing else of the runner.

A call in flight may ask a person (an MCP elicitation, `pizzabot.agent.asking`): the run stays held
while it waits. A call whose start a crash interrupted has its unanswered questions closed
(cancelled) before the crash rules decide what happens to it.

A tool's error text passes the `Redactor` before it is stored: the event log is also the
trace, the API's answer and every channel's message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol, assert_never

from pizzabot.agent import settle
from pizzabot.agent.asking import Asker, close_question
from pizzabot.agent.away_cards import route_cards
from pizzabot.agent.context import Context
from pizzabot.agent.conversation import CallState
from pizzabot.agent.events import (
    DecisionMade,
    NewEvent,
    ToolInterrupted,
    ToolRequest,
    ToolResult,
    ToolStarted,
)
from pizzabot.agent.held import HeldRun, Outcome
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.agent.notify import fyi_item, notify_approvers
from pizzabot.agent.policy.grants import Grant, make_grant
from pizzabot.agent.preview import Previewer
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.settle import (
    INTERRUPTED_ASK,
    REASKED,
    AskPerson,
    AwaitDecision,
    Execute,
    Granted,
    StopRun,
    TellModel,
)
from pizzabot.agent.targets import targets_for
from pizzabot.agent.tools import Tools, ToolSpec, split_wire_name
from pizzabot.agent.undo import offer

__all__ = ["CallSteps", "Finish"]


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [cut: {len(text) - limit} more characters]"


class Finish(Protocol):
    """How a run is ended (`pizzabot.agent.engine.Runner`'s): a call's plan may stop it."""

    async def __call__(
        self, held: HeldRun, status: RunStatus, *, error: str | None = None
    ) -> None: ...


class CallSteps:
    """The tool-call half of `pizzabot.agent.engine.Runner`'s step: settles one call at a time
    (`carry_out`) with the run's context, the tools, the redactor for what is stored, and the
    runner's way to end a run."""

    def __init__(self, ctx: Context, *, tools: Tools, redact: Redactor, finish: Finish) -> None:
        self.ctx = ctx
        self.tools = tools
        self.redact = redact
        self._finish = finish

    async def _plan(self, held: HeldRun, call: CallState, spec: ToolSpec | None) -> settle.Plan:
        """`pizzabot.agent.settle.plan` for a call, with the grants that may let it run unasked."""
        step = settle.plan(call, held.skill, spec)
        grants = self.ctx.grants
        if isinstance(step, AskPerson) and not step.again and grants is not None:
            # Only a call that would ask a person looks for a grant: one query, where needed.
            server, name = split_wire_name(call.wire_name)
            now = self.ctx.clock()
            found = await grants.for_call(
                skill=held.skill.name, tool=f"{server}.{name}", run_id=held.run.id, now=now
            )
            if found:
                step = settle.plan(call, held.skill, spec, Granted(found, held.run.id, now))
        return step

    async def carry_out(
        self,
        held: HeldRun,
        call: CallState,
        spec: ToolSpec | None,
        later: Sequence[tuple[CallState, ToolSpec | None]] = (),
    ) -> Outcome:
        """Carry out what `pizzabot.agent.settle.plan` says for a call that has no result yet.
        `later`: the turn's calls after it, asked together with it when it asks."""
        server, name = split_wire_name(call.wire_name)
        qualified = f"{server}.{name}"
        if call.started:
            await self._close_questions(held, call)
        step = await self._plan(held, call, spec)
        match step:
            case TellModel():
                await self._tell_model(held, call, step)
                return "continue"
            case Execute(args=args, item_id=item_id, rule=rule, grant=grant):
                if step.grant_asked is not None and item_id is not None:
                    await self._make_grant(held, call, qualified, item_id, step.grant_asked)
                ran = await self._execute(held, call, qualified, args, item_id, rule, grant)
                if step.notify is not None:
                    await self._notify(held, qualified, args, step.notify, ran)
                return "continue"
            case AwaitDecision(item_id=item_id, ask=ask):
                return await self._await_decision(held, call, spec, ask, item_id, later)
            case AskPerson(again=again):
                assert spec is not None
                if again:
                    await self._interrupted(held, call, qualified)
                await self._ask(held, [(call, spec, step), *await self._asks_ahead(held, later)])
                return "wait"
            case StopRun(text=why):
                await self._tell_model(held, call, TellModel(why, expired=True))
                await self._finish(held, RunStatus.CANCELLED, error=why)
                return "end"
            case _:
                assert_never(step)

    async def _await_decision(
        self,
        held: HeldRun,
        call: CallState,
        spec: ToolSpec | None,
        ask: AskPerson,
        item_id: str,
        later: Sequence[tuple[CallState, ToolSpec | None]] = (),
    ) -> Outcome:
        """Wait on the call's item; ask anew if it was closed without a decision. The turn's
        later calls that have no card yet (a crash came between) are asked now."""
        assert spec is not None
        store = self.ctx.store
        item = await store.get_item(item_id)
        ahead = await self._asks_ahead(held, later)
        if item.status is ItemStatus.PENDING:
            if ahead:
                await self._ask(held, ahead)
            else:
                await held.set_status(self.ctx, RunStatus.WAITING)
            return "wait"
        if item.decided_at is not None and item.status is not ItemStatus.CANCELLED:
            # Decided while this step ran (a turn's cards approved one after the other): the
            # decision is in the log, not yet in the copy held. The log is the truth.
            events = await store.events(held.run.id)
            if any(
                isinstance(e.payload, DecisionMade) and e.payload.item_id == item.id for e in events
            ):
                held.events = events  # the loop plans again from it
                return "continue"
        await self._ask(held, [(call, spec, ask), *ahead])
        return "wait"

    async def _asks_ahead(
        self, held: HeldRun, later: Sequence[tuple[CallState, ToolSpec | None]]
    ) -> list[tuple[CallState, ToolSpec, AskPerson]]:
        """The turn's later calls that will ask a person and have no card yet. They are put
        on cards with the first, so all of a turn's questions can be answered at once
        ("approve all"); they still run in the model's order, each after its decision."""
        asks: list[tuple[CallState, ToolSpec, AskPerson]] = []
        for call, spec in later:
            if spec is None:
                continue
            step = await self._plan(held, call, spec)
            if isinstance(step, AskPerson) and not step.again:
                asks.append((call, spec, step))
        return asks

    async def _close_questions(self, held: HeldRun, call: CallState) -> None:
        """Cancel what an interrupted start of the call asked and no one answered: the
        call that waited for it is gone."""
        store = self.ctx.store
        pending = await store.list_items(run_id=held.run.id, status=ItemStatus.PENDING)
        closed = False
        for item in pending:
            if item.kind is not ItemKind.QUESTION or item.call_id != call.id:
                continue
            why = "the tool call that asked was interrupted"
            closed = await close_question(self.ctx, item, reason=why) is not None or closed
        if closed:
            held.events = await store.events(held.run.id)

    async def _interrupted(self, held: HeldRun, call: CallState, qualified: str) -> None:
        why = INTERRUPTED_ASK
        await held.append(
            self.ctx, [NewEvent(ToolInterrupted(call_id=call.id, tool=qualified, why=why))]
        )

    async def _tell_model(self, held: HeldRun, call: CallState, said: TellModel) -> None:
        result = self._tool_result(call, said.text, is_error=True, duration_ms=0.0)
        result = result.model_copy(
            update={
                "rejected": said.rejected,
                "expired": said.expired,
                "interrupted": said.interrupted,
                "denied_by": said.denied_by,
            }
        )
        await held.append(self.ctx, [NewEvent(result)])

    async def _make_grant(
        self, held: HeldRun, call: CallState, tool: str, item_id: str, choice: str
    ) -> None:
        """Keep the grant an approval asked for, before its call runs (so the run's next
        call finds it). Made once per item: a step repeated after a crash finds it made."""
        grants, decided = self.ctx.grants, call.decision
        if grants is None or decided is None:
            return
        # The grant counts from the decision, not from when a worker got to it.
        at = next(
            (
                e.at
                for e in held.events
                if isinstance(e.payload, DecisionMade) and e.payload.item_id == item_id
            ),
            self.ctx.clock(),
        )
        grant = make_grant(
            choice,
            id=self.ctx.ids(),
            skill=held.skill.name,
            tool=tool,
            args=call.final_args,
            run_id=held.run.id,
            item_id=item_id,
            granted_by=decided.actor,
            granted_via=decided.channel,
            now=at,
        )
        await grants.add(grant)

    async def _execute(
        self,
        held: HeldRun,
        call: CallState,
        qualified: str,
        args: dict[str, Any],
        item_id: str | None,
        rule: str | None = None,
        grant: Grant | None = None,
    ) -> ToolResult:
        server, name = qualified.split(".", 1)
        started = ToolStarted(
            call_id=call.id,
            tool=qualified,
            args=args,
            item_id=item_id,
            rule=rule,
            grant=grant.id if grant is not None else None,
        )
        # Recorded before the call, so a crash during it is known for what it was.
        await held.append(self.ctx, [NewEvent(started)])
        if grant is not None and self.ctx.grants is not None:
            await self.ctx.grants.used(
                grant, run_id=held.run.id, call_id=call.id, now=self.ctx.clock()
            )
        skill = held.skill
        asker = Asker(self.ctx, held, call_id=call.id, tool=qualified)
        outcome = await self.tools.call(skill, server, name, args, ask=asker.ask)
        text = _truncate(outcome.text, skill.max_tool_result_chars)
        result = self._tool_result(
            call, text, is_error=outcome.is_error, duration_ms=outcome.duration_ms
        )
        await held.append(self.ctx, [NewEvent(result.model_copy(update={"args": args}))])
        return result

    async def _notify(
        self, held: HeldRun, tool: str, args: dict[str, Any], why: str, ran: ToolResult
    ) -> None:
        """Tell a `notify` call's approvers what ran (`pizzabot.agent.notify`)."""
        fyi = fyi_item(
            self.ctx,
            held.skill,
            run_id=held.run.id,
            tool=tool,
            args=args,
            why=why,
            result=ran.text,
            failed=ran.is_error,
            undo=offer(held.skill, tool, args, ran.text, failed=ran.is_error),
        )
        await notify_approvers(self.ctx, held.skill, fyi, lease=held.lease)

    def _tool_result(
        self, call: CallState, text: str, *, is_error: bool, duration_ms: float
    ) -> ToolResult:
        server, name = split_wire_name(call.wire_name)
        # An error is exception text (redact all key shapes); a result is the tool's content,
        # which the model needs as it is, so only the server's own secrets leave it.
        text = self.redact(text) if is_error else self.redact.values_only(text)
        return ToolResult(
            call_id=call.id,
            tool=f"{server}.{name}",
            text=text,
            is_error=is_error,
            duration_ms=round(duration_ms, 2),
        )

    async def _ask(
        self, held: HeldRun, asks: Sequence[tuple[CallState, ToolSpec, AskPerson]]
    ) -> None:
        """Put the calls on cards and park the run, in one transaction: a turn's cards
        appear together."""
        skill = held.skill
        # Worked out before the cards exist, all at once: a card shows what it would do.
        previewer = Previewer(self.tools, redact=self.redact.values_only, redact_error=self.redact)
        risks = await asyncio.gather(
            *(previewer.risk_with_preview(skill, s.qualified, c.args, a.risk) for c, s, a in asks)
        )
        now = self.ctx.clock()
        cards, targets = await route_cards(
            self.ctx,
            skill,
            [
                self._card(held, call, spec, replace(ask, risk=risk), now)
                for (call, spec, ask), risk in zip(asks, risks, strict=True)
            ],
            targets_for(skill, self.ctx.channels),
        )
        await held.park(self.ctx, cards, targets=targets)
        self.ctx.wake_outbox()
        self.ctx.wake_timers()  # its steps count from now; whoever is on call gets it at once

    def _card(
        self, held: HeldRun, call: CallState, spec: ToolSpec, ask: AskPerson, now: datetime
    ) -> tuple[Item, list[NewEvent]]:
        run, skill = held.run, held.skill
        risk, reasked = ask.risk, ask.again
        if self.ctx.grants is None:
            risk = replace(risk, grants=())  # this server keeps no grants: offer none
        context = held.state().last_assistant_text or run.input
        note = f"\n\n(Asked again: {REASKED}.)" if reasked else ""
        if reasked:
            risk = replace(risk, may_have_happened=True)
        item = Item(
            id=self.ctx.ids(),
            run_id=run.id,
            skill=skill.name,
            box=Box.ACTION,
            kind=ItemKind.TOOL,
            status=ItemStatus.PENDING,
            title=f"{skill.name} wants to run {spec.qualified}",
            body=f"{context}{note}",
            created_at=now,
            call_id=call.id,
            tool=spec.qualified,
            args=call.args,
            schema=spec.schema,
            risk=risk,
            secret=self.ctx.secrets(),
        )
        request = ToolRequest(
            call_id=call.id,
            item_id=item.id,
            tool=spec.qualified,
            args=call.args,
            reasked=reasked,
            rule=ask.rule,
        )
        return item, [NewEvent(request)]
