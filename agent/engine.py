"""Step a run until it ends or needs a human, then return: a waiting run is only rows.

`Runner.advance` is what a worker calls with a claimed run. It reads the event log (the
durable state) once, then each step settles the tool calls that have no result yet under the
skill's policy, and otherwise calls the model, appending to the log as it goes. Nothing
outlives the held, so a crash at any point resumes from the last recorded event:

- an `ask` call whose approved execution started but left no result is asked again;
- an `auto` call that started but left no result is repeated only when the skill marks the
  tool `idempotent`; otherwise the model is told the outcome is unknown.

Text that comes from outside (a run's failure, a tool's error) passes the engine's
`Redactor` before it is stored: the event log is also the trace, the API's answer and every
channel's message, so a secret echoed there would be shown everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, assert_never

from agent import conversation, settle
from agent.budgets import BudgetCheck, check_budget, day_start
from agent.context import Context
from agent.conversation import CallState, RunState
from agent.errors import NotFound, RunError, UserError
from agent.events import (
    AssistantMessage,
    BudgetExtended,
    BudgetReached,
    DecisionMade,
    ModelCall,
    ProposedCall,
    ToolInterrupted,
    ToolRequest,
    ToolResult,
    ToolStarted,
)
from agent.finish import finish_run
from agent.llm import ModelClient
from agent.model import (
    Approve,
    Box,
    Edit,
    Event,
    Expired,
    Item,
    ItemKind,
    ItemStatus,
    NewEvent,
    Reject,
    Run,
    RunStatus,
    Usage,
)
from agent.policy.grants import Grant, make_grant
from agent.redaction import Redactor
from agent.settle import (
    INTERRUPTED_ASK,
    REASKED,
    AskPerson,
    AwaitDecision,
    Execute,
    Granted,
    StopRun,
    TellModel,
)
from agent.skills import Budget, Skill
from agent.store import LeaseLost
from agent.targets import targets_for
from agent.tools import ToolHub, ToolSpec, split_wire_name

__all__ = ["Engine", "HeldRun", "Outcome", "Runner", "cancel_in_flight", "finish_run"]

log = logging.getLogger(__name__)

Outcome = Literal["continue", "wait", "end"]


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [cut: {len(text) - limit} more characters]"


@dataclass
class HeldRun:
    """A run this worker holds the lease of, while it steps: the run, the lease token every
    write is fenced with, and its event log read once at the held and extended by every
    append, so a step never re-reads the log. Anything another writer appends also takes the
    run away from this holder (cancel, kill: the status changes), so the next fenced append
    fails and the copy is never used stale."""

    run: Run
    skill: Skill
    lease: str
    events: list[Event]
    status: RunStatus = RunStatus.RUNNING  # what the step that ended the loop left

    def state(self) -> RunState:
        return conversation.derive(self.events)


class Runner:
    """Steps runs: the engine's loop. (Not SQLAlchemy's `Engine`: that is the database.)"""

    def __init__(
        self,
        ctx: Context,
        *,
        model: ModelClient,
        tools: ToolHub,
        lease_seconds: float = 30.0,
        default_budget: Budget | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.ctx = ctx
        #: The server's secrets (``bot`` hands them over) and well-known key shapes.
        self.redact = redactor or Redactor()
        self.default_budget = default_budget or Budget()
        self.model = model
        self.tools = tools
        self.lease_seconds = lease_seconds

    # -- the loop ------------------------------------------------------------------------

    async def advance(
        self, run: Run, *, worker: str, events: list[Event] | None = None
    ) -> RunStatus:
        """Step `run` until it waits, ends, or the lease is lost. `worker` is the lease token
        it was claimed with (the store's `worker=`: every write is fenced with it).
        `events` is its log as read with the held; without it the log is read here.

        The lease is kept by the worker's heartbeat while this runs; every write checks it,
        so a run cancelled, killed or taken over meanwhile stops at its next write."""
        store = self.ctx.store
        try:
            skill = self.ctx.skills.for_run(run.skill, run.created_at)
        except NotFound as exc:
            await self._end(run, RunStatus.FAILED, lease=worker, error=str(exc), skill=None)
            return RunStatus.FAILED
        if events is None:
            events = await store.events(run.id)
        held = HeldRun(run, skill, worker, events)
        try:
            while True:
                outcome = await self._step(held)
                if outcome == "wait":
                    return RunStatus.WAITING
                if outcome == "end":
                    return held.status
        except LeaseLost:
            log.info(
                "run %s: lease lost, leaving it to its new owner", run.id, extra={"run_id": run.id}
            )
            return RunStatus.RUNNING
        except (RunError, UserError) as exc:
            await self._finish(held, RunStatus.FAILED, error=str(exc))
            return RunStatus.FAILED

    async def _append(
        self, held: HeldRun, events: list[NewEvent], *, usage: Usage | None = None
    ) -> None:
        appended = await self.ctx.store.append_events(
            held.run.id, events, worker=held.lease, now=self.ctx.clock(), usage=usage
        )
        if appended and held.events and appended[0].seq != held.events[-1].seq + 1:
            # Someone else wrote in between (should not happen while we hold the lease):
            # the durable log is the truth, read it again.
            held.events = await self.ctx.store.events(held.run.id)
        else:
            held.events.extend(appended)

    async def _step(self, held: HeldRun) -> Outcome:
        run, skill = held.run, held.skill
        state = held.state()
        if state.budget_item is not None:
            return await self._settle_budget(held, state)
        pending = state.pending()
        if pending:
            specs = {s.wire_name: s for s in await self.tools.list_tools(skill)}
            for i, call in enumerate(pending):
                later = [(c, specs.get(c.wire_name)) for c in pending[i + 1 :]]
                outcome = await self._settle_call(held, call, specs.get(call.wire_name), later)
                if outcome != "continue":
                    return outcome
            return "continue"
        if state.finished:
            # A finished run was re-queued without a new message: nothing to do.
            await self.ctx.store.set_status(
                run.id, RunStatus.DONE, worker=held.lease, now=self.ctx.clock()
            )
            held.status = RunStatus.DONE
            return "end"
        if state.answer is not None:
            # The model's final answer is in the log but the run did not end (a server of an
            # older version crashed between the two): end it with that answer, never ask again.
            await self._finish(held, RunStatus.DONE, result=state.answer)
            return "end"
        reached = await self._budget_reached(held, state)
        if reached.reached:
            return await self._ask_budget(held, reached)
        return await self._call_model(held, state)

    async def _budget_reached(self, held: HeldRun, state: RunState) -> BudgetCheck:
        run, skill, now = held.run, held.skill, self.ctx.clock()
        budget = skill.budget.over(self.default_budget)
        day = None
        if budget.per_day.tokens is not None or budget.per_day.cost_usd is not None:
            day = await self.ctx.store.skill_usage_since(skill.name, day_start(now))
        started = state.wall_started or run.created_at
        return check_budget(budget, run, state.usage, now, started, day)

    # -- the model -----------------------------------------------------------------------

    async def _call_model(self, held: HeldRun, state: RunState) -> Outcome:
        skill = held.skill
        specs = await self.tools.list_tools(skill)
        messages = conversation.messages(skill.instructions, held.events, state)
        reply = await self.model.complete(skill, messages, [s.as_openai() for s in specs])
        calls = [
            ProposedCall(id=c.id, name=c.name, arguments=c.arguments) for c in reply.tool_calls
        ]
        before = state.usage
        usage = Usage(
            tokens=before.tokens + reply.tokens_in + reply.tokens_out,
            cost_usd=round(before.cost_usd + (reply.cost_usd or 0.0), 6),
            steps=before.steps + 1,
            cost_known=before.cost_known and reply.cost_usd is not None,
        )
        said = [
            NewEvent(
                ModelCall(
                    model=reply.model,
                    tokens_in=reply.tokens_in,
                    tokens_out=reply.tokens_out,
                    cost_usd=reply.cost_usd,
                    latency_ms=round(reply.latency_ms, 2),
                    attempts=reply.attempts,
                )
            ),
            NewEvent(AssistantMessage(text=reply.text, tool_calls=calls)),
        ]
        if not calls:
            # The final answer and the run's end in one transaction: a crash leaves either
            # both or neither, so the model is never asked again for an answer on record.
            await self._finish(
                held, RunStatus.DONE, result=reply.text or "", usage=usage, answer=said
            )
            return "end"
        await self._append(held, said, usage=usage)
        return "continue"

    # -- tool calls ----------------------------------------------------------------------

    async def _plan(self, held: HeldRun, call: CallState, spec: ToolSpec | None) -> settle.Plan:
        """`agent.settle.plan` for a call, with the grants that may let it run unasked."""
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

    async def _settle_call(
        self,
        held: HeldRun,
        call: CallState,
        spec: ToolSpec | None,
        later: Sequence[tuple[CallState, ToolSpec | None]] = (),
    ) -> Outcome:
        """Carry out what `agent.settle.plan` says for a call that has no result yet.
        `later`: the turn's calls after it, asked together with it when it asks."""
        server, name = split_wire_name(call.wire_name)
        qualified = f"{server}.{name}"
        step = await self._plan(held, call, spec)
        match step:
            case TellModel():
                await self._tell_model(held, call, step)
                return "continue"
            case Execute(args=args, item_id=item_id, rule=rule, grant=grant):
                if step.grant_asked is not None and item_id is not None:
                    await self._make_grant(held, call, qualified, item_id, step.grant_asked)
                await self._execute(held, call, qualified, args, item_id, rule, grant)
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
        store, now = self.ctx.store, self.ctx.clock()
        item = await store.get_item(item_id)
        ahead = await self._asks_ahead(held, later)
        if item.status is ItemStatus.PENDING:
            if ahead:
                await self._ask(held, ahead)
            else:
                await store.set_status(held.run.id, RunStatus.WAITING, worker=held.lease, now=now)
            return "wait"
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

    async def _interrupted(self, held: HeldRun, call: CallState, qualified: str) -> None:
        why = INTERRUPTED_ASK
        await self._append(
            held, [NewEvent(ToolInterrupted(call_id=call.id, tool=qualified, why=why))]
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
        await self._append(held, [NewEvent(result)])

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
    ) -> None:
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
        await self._append(held, [NewEvent(started)])
        if grant is not None and self.ctx.grants is not None:
            await self.ctx.grants.used(
                grant, run_id=held.run.id, call_id=call.id, now=self.ctx.clock()
            )
        skill = held.skill
        outcome = await self.tools.call(skill, server, name, args)
        text = _truncate(outcome.text, skill.max_tool_result_chars)
        result = self._tool_result(
            call, text, is_error=outcome.is_error, duration_ms=outcome.duration_ms
        )
        await self._append(held, [NewEvent(result.model_copy(update={"args": args}))])

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
        skill, now = held.skill, self.ctx.clock()
        await self.ctx.store.create_items(
            [self._card(held, call, spec, ask, now) for call, spec, ask in asks],
            targets=targets_for(skill, self.ctx.channels),
            worker=held.lease,
            now=now,
            run_status=RunStatus.WAITING,
        )
        self.ctx.wake_outbox()

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

    # -- budgets -------------------------------------------------------------------------

    async def _ask_budget(self, held: HeldRun, reached: BudgetCheck) -> Outcome:
        run, skill = held.run, held.skill
        now = self.ctx.clock()
        why = reached.reached or "budget reached"
        extend = reached.extend
        what = ", ".join(f"{k.replace('_', ' ')} +{v:g}" for k, v in extend.items())
        item = Item(
            id=self.ctx.ids(),
            run_id=run.id,
            skill=skill.name,
            box=Box.ACTION,
            kind=ItemKind.BUDGET,
            status=ItemStatus.PENDING,
            title=f"{skill.name}: budget reached — extend or stop",
            body=f"{why}. Approve to extend by {what}; reject to stop the run.",
            created_at=now,
            args=extend,
            secret=self.ctx.secrets(),
        )
        await self.ctx.store.create_item(
            item,
            targets=targets_for(skill, self.ctx.channels),
            worker=held.lease,
            now=now,
            run_status=RunStatus.WAITING,
            events=[NewEvent(BudgetReached(item_id=item.id, why=why, extend=extend))],
        )
        self.ctx.wake_outbox()
        return "wait"

    async def _settle_budget(self, held: HeldRun, state: RunState) -> Outcome:
        run = held.run
        decision = state.budget_decision
        now = self.ctx.clock()
        if decision is None:
            await self.ctx.store.set_status(run.id, RunStatus.WAITING, worker=held.lease, now=now)
            return "wait"
        match decision.decision:
            case Approve():
                # The approval's arguments are the item's extension.
                extend = {k: float(v) for k, v in (decision.args or {}).items()}
                extended = BudgetExtended(
                    extend=extend, by=decision.actor, item_id=decision.item_id
                )
                # The extension and its event in one transaction: applied once, crash or not.
                appended = await self.ctx.store.add_budget(
                    run.id, extend, worker=held.lease, now=now, event=NewEvent(extended)
                )
                held.events.extend(appended)
                # The budget check reads what was added from the run.
                held.run = await self.ctx.store.get_run(run.id)
                return "continue"
            case Reject(reason=why) | Expired(reason=why):
                reason = f"stopped at the budget by {decision.actor}"
                if why:
                    reason += f": {why}"
                await self._finish(held, RunStatus.CANCELLED, error=reason)
                return "end"
            case Edit():
                raise AssertionError("a budget item cannot be edited")
            case _:
                assert_never(decision.decision)

    # -- the end -------------------------------------------------------------------------

    async def _finish(
        self,
        held: HeldRun,
        status: RunStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        answer: Sequence[NewEvent] = (),
    ) -> None:
        await finish_run(
            self.ctx,
            held.run,
            status,
            worker=held.lease,
            skill=held.skill,
            result=result,
            error=None if error is None else self.redact(error),
            usage=usage or held.state().usage,
            answer=answer,
        )
        held.status = status

    async def _end(
        self,
        run: Run,
        status: RunStatus,
        *,
        lease: str,
        skill: Skill | None,
        error: str,
    ) -> None:
        """End a run that could not be stepped at all (its skill is gone)."""
        await finish_run(self.ctx, run, status, worker=lease, skill=skill, error=self.redact(error))


async def cancel_in_flight(task: asyncio.Task[Any]) -> None:
    task.cancel()
    # The task's own end (usually CancelledError) is what we asked for.
    with contextlib.suppress(BaseException):
        await task


#: The old name, until every caller in `bot/` says `Runner`.
Engine = Runner
