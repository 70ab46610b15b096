"""Step a run until it ends or needs a human, then return: a waiting run is only rows.

`Runner.advance` is what a worker calls with a claimed run. It reads the event log (the
durable state) once, then each step settles the tool calls that have no result yet under the
skill's policy, and otherwise calls the model, appending to the log as it goes. Nothing
outlives the held, so a crash at any point resumes from the last recorded event:

- an `ask` call whose approved execution started but left no result is asked again;
- an `auto` call that started but left no result is repeated only when the skill marks the
  tool `idempotent`; otherwise the model is told the outcome is unknown.

A run of an inbox-only skill is a request from an agent Pizza Bot does not run: it has no
model, and its one item's decision ends it (`pizzabot.agent.request_end.answer_request`).

Text that comes from outside (a run's failure, a tool's error) passes the engine's
`Redactor` before it is stored: the event log is also the trace, the API's answer and every
channel's message, so a secret echoed there would be shown everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, assert_never

from pizzabot.agent import conversation
from pizzabot.agent.asking import Asker
from pizzabot.agent.budgets import BudgetCheck, check_budget, day_start
from pizzabot.agent.calls import CallSteps
from pizzabot.agent.context import Context
from pizzabot.agent.conversation import RunState
from pizzabot.agent.errors import NotFound, RunError, UserError
from pizzabot.agent.events import (
    AssistantMessage,
    BudgetExtended,
    BudgetReached,
    Event,
    ModelCall,
    NewEvent,
    ProposedCall,
)
from pizzabot.agent.finish import finish_run
from pizzabot.agent.held import HeldRun, Outcome
from pizzabot.agent.llm import ModelClient
from pizzabot.agent.model import (
    Approve,
    Box,
    Edit,
    Expired,
    Item,
    ItemKind,
    ItemStatus,
    Reject,
    Run,
    RunStatus,
    Usage,
)
from pizzabot.agent.redaction import Redactor
from pizzabot.agent.request_end import answer_request
from pizzabot.agent.skills import Budget, Skill
from pizzabot.agent.store import LeaseLost
from pizzabot.agent.targets import targets_for
from pizzabot.agent.tools import AskFn, ConnectFn, Tools

__all__ = ["HeldRun", "Outcome", "Runner", "cancel_in_flight", "finish_run"]

log = logging.getLogger(__name__)


class Runner:
    """Steps runs: the engine's loop. How each tool call is carried out is its `calls`
    (`pizzabot.agent.calls.CallSteps`); the tools are any `pizzabot.agent.tools.Tools`."""

    def __init__(
        self,
        ctx: Context,
        *,
        model: ModelClient,
        tools: Tools,
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
        self.calls = CallSteps(ctx, tools=tools, redact=self.redact, finish=self._finish)

    # -- the loop ------------------------------------------------------------------------

    async def advance(
        self, run: Run, *, lease: str, events: list[Event] | None = None
    ) -> RunStatus:
        """Step `run` until it waits, ends, or the lease is lost. `lease` is the token it
        was claimed with (the store's `lease=`: every write is fenced with it).
        `events` is its log as read with the held; without it the log is read here.

        The lease is kept by the worker's heartbeat while this runs; every write checks it,
        so a run cancelled, killed or taken over meanwhile stops at its next write."""
        store = self.ctx.store
        try:
            skill = self.ctx.skills.for_run(run.skill, run.created_at)
        except NotFound as exc:
            await self._end(run, RunStatus.FAILED, lease=lease, error=str(exc), skill=None)
            return RunStatus.FAILED
        if events is None:
            events = await store.events(run.id)
        held = HeldRun(run, skill, lease, events)
        try:
            if skill.inbox_only:
                # A request's run: its item's decision ends it; there is no model to call.
                return await answer_request(self.ctx, held)
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

    async def _step(self, held: HeldRun) -> Outcome:
        skill = held.skill
        state = held.state()
        if state.budget_item is not None:
            return await self._settle_budget(held, state)
        pending = state.pending()
        if pending:
            specs = {
                s.wire_name: s
                for s in await self.tools.list_tools(skill, connect=self._connect(held))
            }
            log = held.events
            for i, call in enumerate(pending):
                later = [(c, specs.get(c.wire_name)) for c in pending[i + 1 :]]
                outcome = await self.calls.carry_out(held, call, specs.get(call.wire_name), later)
                if outcome != "continue" or held.events is not log:
                    # The log was read anew (a decision came meanwhile): plan from it.
                    return outcome
            return "continue"
        if state.finished:
            # A finished run was re-queued without a new message: nothing to do.
            await held.set_status(self.ctx, RunStatus.DONE)
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

    def _connect(self, held: HeldRun) -> ConnectFn:
        """Who is asked to connect a server of the run's skill (an OAuth consent): the person
        behind the run, with a question card titled after the server."""

        def ask(server: str) -> AskFn:
            return Asker(self.ctx, held, call_id=f"connect:{server}", tool=server).ask

        return ask

    # -- the model -----------------------------------------------------------------------

    async def _call_model(self, held: HeldRun, state: RunState) -> Outcome:
        skill = held.skill
        specs = await self.tools.list_tools(skill, connect=self._connect(held))
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
        # Committed with the first call's start (or before whatever else the step writes).
        await held.append(self.ctx, said, usage=usage, defer=True)
        return "continue"

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
        reached_event = NewEvent(BudgetReached(item_id=item.id, why=why, extend=extend))
        await held.park(
            self.ctx, [(item, [reached_event])], targets=targets_for(skill, self.ctx.channels)
        )
        self.ctx.wake_outbox()
        return "wait"

    async def _settle_budget(self, held: HeldRun, state: RunState) -> Outcome:
        run = held.run
        decision = state.budget_decision
        now = self.ctx.clock()
        if decision is None:
            await held.set_status(self.ctx, RunStatus.WAITING)
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
                    run.id, extend, lease=held.lease, now=now, event=NewEvent(extended)
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
        await held.finish(
            self.ctx,
            status,
            result=result,
            error=None if error is None else self.redact(error),
            usage=usage,
            answer=answer,
        )

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
        await finish_run(self.ctx, run, status, lease=lease, skill=skill, error=self.redact(error))


async def cancel_in_flight(task: asyncio.Task[Any]) -> None:
    task.cancel()
    # The task's own end (usually CancelledError) is what we asked for.
    with contextlib.suppress(BaseException):
        await task
