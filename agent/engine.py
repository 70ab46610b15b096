"""Step a run until it ends or needs a human, then return: a waiting run is only rows.

`Engine.advance` is what a worker calls with a claimed run. It reads the event log (the
durable state) once, then each step settles the tool calls that have no result yet under the
skill's policy, and otherwise calls the model, appending to the log as it goes. Nothing
outlives the claim, so a crash at any point resumes from the last recorded event:

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
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, assert_never

from agent import conversation
from agent.context import Context
from agent.conversation import CallState, RunState
from agent.errors import NotFound, RunError, UserError
from agent.events import (
    AssistantMessage,
    BudgetExtended,
    BudgetReached,
    ModelCall,
    ProposedCall,
    RunFinished,
    ToolInterrupted,
    ToolRequest,
    ToolResult,
    ToolStarted,
)
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
    Risk,
    Run,
    RunStatus,
    Target,
    Usage,
)
from agent.redaction import Redactor
from agent.skills import Budget, Skill
from agent.store import LeaseLost
from agent.tools import ToolHub, ToolSpec, split_wire_name

log = logging.getLogger(__name__)

Outcome = Literal["continue", "wait", "end"]


def targets_for(skill: Skill, channels: frozenset[str]) -> list[Target]:
    """Where a skill's items go, limited to the channels that are configured."""
    targets: list[Target] = []
    if "slack" in channels and skill.deliver.slack:
        targets.append(Target("slack", skill.deliver.slack))
    if "email" in channels:
        targets.extend(Target("email", a) for a in skill.deliver.email)
    return targets


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [cut: {len(text) - limit} more characters]"


@dataclass(frozen=True)
class BudgetCheck:
    reached: str | None  # a sentence saying which budget, or None
    extend: dict[str, float]  # what "extend" adds: the budget that was reached, once more


def day_start(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def check_budget(
    budget: Budget,
    run: Run,
    usage: Usage,
    now: datetime,
    started: datetime | None,
    day: Usage | None = None,
) -> BudgetCheck:
    """Which budget the run has reached, if any. `run.budget_extra` holds what "extend"
    decisions added; `day` is what all runs of the skill used today."""
    extra = run.budget_extra

    def cap(key: str, base: float) -> float:
        return base + extra.get(key, 0)

    if budget.tokens is not None and usage.tokens >= cap("tokens", budget.tokens):
        why = f"token budget reached: {usage.tokens} of {cap('tokens', budget.tokens):g} tokens"
        return BudgetCheck(why, {"tokens": budget.tokens})
    if budget.steps is not None and usage.steps >= cap("steps", budget.steps):
        why = f"step budget reached: {usage.steps} of {cap('steps', budget.steps):g} model calls"
        return BudgetCheck(why, {"steps": budget.steps})
    if budget.cost_usd is not None and usage.cost_usd >= cap("cost_usd", budget.cost_usd):
        why = (
            f"cost budget reached: ${usage.cost_usd:.4f} of ${cap('cost_usd', budget.cost_usd):.4f}"
        )
        return BudgetCheck(why, {"cost_usd": budget.cost_usd})
    if budget.wall_time is not None and started is not None:
        elapsed = (now - started).total_seconds()
        if elapsed >= cap("wall_time", budget.wall_time):
            why = f"wall-time budget reached: {elapsed:.0f}s of {cap('wall_time', budget.wall_time):.0f}s"
            return BudgetCheck(why, {"wall_time": budget.wall_time})
    daily = budget.per_day
    if (
        day is not None
        and daily.tokens is not None
        and day.tokens >= cap("day_tokens", daily.tokens)
    ):
        why = (
            f"daily token budget of skill {run.skill} reached: {day.tokens} of "
            f"{cap('day_tokens', daily.tokens):g} tokens today"
        )
        return BudgetCheck(why, {"day_tokens": daily.tokens})
    if (
        day is not None
        and daily.cost_usd is not None
        and day.cost_usd >= cap("day_cost_usd", daily.cost_usd)
    ):
        why = (
            f"daily cost budget of skill {run.skill} reached: ${day.cost_usd:.4f} of "
            f"${cap('day_cost_usd', daily.cost_usd):.4f} today"
        )
        return BudgetCheck(why, {"day_cost_usd": daily.cost_usd})
    return BudgetCheck(None, {})


@dataclass
class Claim:
    """What one claim of a run keeps while it steps: the run, and its event log read once at
    the claim and extended by every append, so a step never re-reads the log. Anything
    another writer appends also takes the run away from this claim (cancel, kill: the status
    changes), so the next fenced append fails and the copy is never used stale."""

    run: Run
    skill: Skill
    worker: str
    events: list[Event]
    status: RunStatus = RunStatus.RUNNING  # what the step that ended the loop left

    def state(self) -> RunState:
        return conversation.derive(self.events)


class Engine:
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
        """Step `run` (claimed by `worker`) until it waits, ends, or the lease is lost.
        `events` is its log as read with the claim; without it the log is read here.

        The lease is kept by the worker's heartbeat while this runs; every write checks it,
        so a run cancelled, killed or taken over meanwhile stops at its next write."""
        store = self.ctx.store
        try:
            skill = self.ctx.skills.for_run(run.skill, run.created_at)
        except NotFound as exc:
            await self._end(run, RunStatus.FAILED, worker=worker, error=str(exc), skill=None)
            return RunStatus.FAILED
        if events is None:
            events = await store.events(run.id)
        claim = Claim(run, skill, worker, events)
        try:
            while True:
                outcome = await self._step(claim)
                if outcome == "wait":
                    return RunStatus.WAITING
                if outcome == "end":
                    return claim.status
        except LeaseLost:
            log.info(
                "run %s: lease lost, leaving it to its new owner", run.id, extra={"run_id": run.id}
            )
            return RunStatus.RUNNING
        except (RunError, UserError) as exc:
            await self._finish(claim, RunStatus.FAILED, error=str(exc))
            return RunStatus.FAILED

    async def _append(
        self, claim: Claim, events: list[NewEvent], *, usage: Usage | None = None
    ) -> None:
        appended = await self.ctx.store.append_events(
            claim.run.id, events, worker=claim.worker, now=self.ctx.clock(), usage=usage
        )
        if appended and claim.events and appended[0].seq != claim.events[-1].seq + 1:
            # Someone else wrote in between (should not happen while we hold the lease):
            # the durable log is the truth, read it again.
            claim.events = await self.ctx.store.events(claim.run.id)
        else:
            claim.events.extend(appended)

    async def _step(self, claim: Claim) -> Outcome:
        run, skill = claim.run, claim.skill
        state = claim.state()
        if state.budget_item is not None:
            return await self._settle_budget(claim, state)
        pending = state.pending()
        if pending:
            specs = {s.wire_name: s for s in await self.tools.list_tools(skill)}
            for call in pending:
                outcome = await self._settle_call(claim, call, specs.get(call.wire_name))
                if outcome != "continue":
                    return outcome
            return "continue"
        if state.finished:
            # A finished run was re-queued without a new message: nothing to do.
            await self.ctx.store.set_status(
                run.id, RunStatus.DONE, worker=claim.worker, now=self.ctx.clock()
            )
            claim.status = RunStatus.DONE
            return "end"
        now = self.ctx.clock()
        budget = skill.budget.over(self.default_budget)
        day = None
        if budget.per_day.tokens is not None or budget.per_day.cost_usd is not None:
            day = await self.ctx.store.skill_usage_since(skill.name, day_start(now))
        reached = check_budget(
            budget, run, state.usage, now, state.wall_started or run.created_at, day
        )
        if reached.reached:
            return await self._ask_budget(claim, reached)
        return await self._call_model(claim, state)

    # -- the model -----------------------------------------------------------------------

    async def _call_model(self, claim: Claim, state: RunState) -> Outcome:
        skill = claim.skill
        specs = await self.tools.list_tools(skill)
        messages = conversation.messages(skill.instructions, claim.events, state)
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
        await self._append(
            claim,
            [
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
            ],
            usage=usage,
        )
        if not calls:
            await self._finish(claim, RunStatus.DONE, result=reply.text or "", usage=usage)
            return "end"
        return "continue"

    # -- tool calls ----------------------------------------------------------------------

    async def _settle_call(self, claim: Claim, call: CallState, spec: ToolSpec | None) -> Outcome:
        run, skill = claim.run, claim.skill
        server, name = split_wire_name(call.wire_name)
        qualified = f"{server}.{name}"
        store, now = self.ctx.store, self.ctx.clock()
        if spec is None:
            await self._result(claim, call, f"there is no tool named {call.wire_name!r}", True, 0.0)
            return "continue"
        rule = skill.rule(qualified)
        if rule.policy == "deny":
            await self._result(
                claim,
                call,
                f"the tool {qualified} is not allowed by the policy of this skill; "
                "do not try to reach the same effect another way",
                True,
                0.0,
            )
            return "continue"
        if rule.policy == "auto":
            if call.started and not rule.idempotent:
                await self._result(
                    claim,
                    call,
                    "this call was interrupted by a restart and its outcome is "
                    "unknown; it was not repeated",
                    True,
                    0.0,
                    interrupted=True,
                )
                return "continue"
            await self._execute(claim, call, qualified, call.args, None)
            return "continue"
        # ask
        decided = call.decision
        if decided is None:
            if call.item_ids:
                item = await store.get_item(call.item_ids[-1])
                if item.status is ItemStatus.PENDING:
                    await store.set_status(run.id, RunStatus.WAITING, worker=claim.worker, now=now)
                    return "wait"
            await self._ask(claim, call, spec, rule.risk, reasked=False)
            return "wait"
        match decided.decision:
            case Reject(reason=reason):
                await self._result(
                    claim,
                    call,
                    f"A human ({decided.actor}) rejected this call. "
                    f"Reason: {reason or 'no reason given'}. Do not retry it; adjust your plan.",
                    True,
                    0.0,
                    rejected=True,
                )
                return "continue"
            case Expired(reason=reason, halt=halt):
                why = reason or "no one answered in time"
                await self._result(claim, call, why, True, 0.0, expired=True)
                if halt:
                    # on_timeout: halt. The result above keeps the conversation whole for a follow-up.
                    await self._finish(claim, RunStatus.CANCELLED, error=why)
                    return "end"
                return "continue"
            case Approve() | Edit():
                pass
            case _:
                assert_never(decided.decision)
        if call.started:
            await self._append(
                claim,
                [
                    NewEvent(
                        ToolInterrupted(
                            call_id=call.id,
                            tool=qualified,
                            why="the approved call was interrupted by a restart; asking again",
                        )
                    )
                ],
            )
            await self._ask(claim, call, spec, rule.risk, reasked=True)
            return "wait"
        await self._execute(
            claim,
            call,
            qualified,
            call.final_args,
            call.item_ids[-1] if call.item_ids else None,
        )
        return "continue"

    async def _execute(
        self,
        claim: Claim,
        call: CallState,
        qualified: str,
        args: dict[str, Any],
        item_id: str | None,
    ) -> None:
        server, name = qualified.split(".", 1)
        # Recorded before the call, so a crash during it is known for what it was.
        await self._append(
            claim,
            [NewEvent(ToolStarted(call_id=call.id, tool=qualified, args=args, item_id=item_id))],
        )
        skill = claim.skill
        outcome = await self.tools.call(skill, server, name, args)
        await self._result(
            claim,
            call,
            _truncate(outcome.text, skill.max_tool_result_chars),
            outcome.is_error,
            outcome.duration_ms,
            args=args,
        )

    async def _result(
        self,
        claim: Claim,
        call: CallState,
        text: str,
        is_error: bool,
        duration_ms: float,
        *,
        args: dict[str, Any] | None = None,
        rejected: bool = False,
        expired: bool = False,
        interrupted: bool = False,
    ) -> None:
        server, name = split_wire_name(call.wire_name)
        # An error is exception text (redact all key shapes); a result is the tool's content,
        # which the model needs as it is, so only the server's own secrets leave it.
        text = self.redact(text) if is_error else self.redact.values_only(text)
        result = ToolResult(
            call_id=call.id,
            tool=f"{server}.{name}",
            text=text,
            is_error=is_error,
            duration_ms=round(duration_ms, 2),
            args=args,
            rejected=rejected,
            expired=expired,
            interrupted=interrupted,
        )
        await self._append(claim, [NewEvent(result)])

    async def _ask(
        self,
        claim: Claim,
        call: CallState,
        spec: ToolSpec,
        risk: Risk,
        *,
        reasked: bool,
    ) -> None:
        run, skill = claim.run, claim.skill
        now = self.ctx.clock()
        context = claim.state().last_assistant_text or run.input
        note = (
            "\n\n(Asked again: the approved call was interrupted by a restart before it finished.)"
            if reasked
            else ""
        )
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
        await self.ctx.store.create_item(
            item,
            targets=targets_for(skill, self.ctx.channels),
            worker=claim.worker,
            now=now,
            run_status=RunStatus.WAITING,
            events=[
                NewEvent(
                    ToolRequest(
                        call_id=call.id,
                        item_id=item.id,
                        tool=spec.qualified,
                        args=call.args,
                        reasked=reasked,
                    )
                )
            ],
        )
        self.ctx.wake_outbox()

    # -- budgets -------------------------------------------------------------------------

    async def _ask_budget(self, claim: Claim, reached: BudgetCheck) -> Outcome:
        run, skill = claim.run, claim.skill
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
            worker=claim.worker,
            now=now,
            run_status=RunStatus.WAITING,
            events=[NewEvent(BudgetReached(item_id=item.id, why=why, extend=extend))],
        )
        self.ctx.wake_outbox()
        return "wait"

    async def _settle_budget(self, claim: Claim, state: RunState) -> Outcome:
        run = claim.run
        decision = state.budget_decision
        now = self.ctx.clock()
        if decision is None:
            await self.ctx.store.set_status(run.id, RunStatus.WAITING, worker=claim.worker, now=now)
            return "wait"
        match decision.decision:
            case Approve():
                item = await self.ctx.store.get_item(decision.item_id)
                extend = {k: float(v) for k, v in (item.args or {}).items()}
                await self.ctx.store.add_budget(run.id, extend)
                await self._append(
                    claim, [NewEvent(BudgetExtended(extend=extend, by=decision.actor))]
                )
                # The budget check reads what was added from the run.
                claim.run = await self.ctx.store.get_run(run.id)
                return "continue"
            case Reject(reason=why) | Expired(reason=why):
                reason = f"stopped at the budget by {decision.actor}"
                if why:
                    reason += f": {why}"
                await self._finish(claim, RunStatus.CANCELLED, error=reason)
                return "end"
            case Edit():
                raise AssertionError("a budget item cannot be edited")
            case _:
                assert_never(decision.decision)

    # -- the end -------------------------------------------------------------------------

    async def _finish(
        self,
        claim: Claim,
        status: RunStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        await finish_run(
            self.ctx,
            claim.run,
            status,
            worker=claim.worker,
            skill=claim.skill,
            result=result,
            error=None if error is None else self.redact(error),
            usage=usage or claim.state().usage,
        )
        claim.status = status

    async def _end(
        self,
        run: Run,
        status: RunStatus,
        *,
        worker: str,
        skill: Skill | None,
        error: str,
    ) -> None:
        """End a run that could not be stepped at all (its skill is gone)."""
        await finish_run(
            self.ctx, run, status, worker=worker, skill=skill, error=self.redact(error)
        )


async def finish_run(
    ctx: Context,
    run: Run,
    status: RunStatus,
    *,
    worker: str | None,
    skill: Skill | None,
    result: str | None = None,
    error: str | None = None,
    usage: Usage | None = None,
    actor: str | None = None,
) -> None:
    """End a run: its status, a RUN_FINISHED event, its open actions closed, and an Unread
    item — in one transaction, so a run is never done without its note in the inbox."""
    store, now = ctx.store, ctx.clock()
    if usage is None:
        usage = conversation.derive(await store.events(run.id)).usage
    verb = {
        RunStatus.DONE: "finished",
        RunStatus.FAILED: "failed",
        RunStatus.CANCELLED: "was cancelled",
        RunStatus.KILLED: "was killed",
    }.get(status, str(status))
    body = result if status is RunStatus.DONE else (error or verb)
    note = Item(
        id=ctx.ids(),
        run_id=run.id,
        skill=run.skill,
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title=f"{run.skill} {verb}",
        body=body or "",
        created_at=now,
        secret=ctx.secrets(),
    )
    await store.finish_run(
        run.id,
        status,
        worker=worker,
        now=now,
        event=NewEvent(RunFinished(status=status, result=result, error=error, by=actor)),
        note=note,
        targets=targets_for(skill, ctx.channels) if skill is not None else [],
        result=result,
        error=error,
        usage=usage,
        killed_by=actor if status is RunStatus.KILLED else None,
    )
    ctx.wake_outbox()
    if ctx.on_run_end is not None:
        try:
            await ctx.on_run_end(run.id)
        except Exception:
            log.warning(
                "run %s: the end-of-run hook failed",
                run.id,
                exc_info=True,
                extra={"run_id": run.id},
            )


async def cancel_in_flight(task: asyncio.Task[Any]) -> None:
    task.cancel()
    # The task's own end (usually CancelledError) is what we asked for.
    with contextlib.suppress(BaseException):
        await task
