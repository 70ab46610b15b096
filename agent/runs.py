"""Starting, following up, cancelling and killing runs: the engine's public entry points.

Every trigger (CLI, API, web, Slack, email, schedule, webhook) ends here, and says who is
asking (a `Principal`): whether they may is the policy's answer (`pizzabot.agent.policy.access`),
asked here and audited when refused, not left to each channel to remember. These functions
only write rows and wake a worker, or hand a new run straight to this process's worker
(claimed in the transaction that creates it); the work happens in `pizzabot.agent.engine`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pizzabot.agent.context import Context
from pizzabot.agent.errors import Conflict, InboxOnly, KillSwitchOn, NotAllowed
from pizzabot.agent.events import NewEvent, RunStarted, UserMessage
from pizzabot.agent.finish import finish_run
from pizzabot.agent.model import Run, RunStatus
from pizzabot.agent.policy.access import Verdict, audit_refusal
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.skills import inbox_only
from pizzabot.agent.store import kill_reason


class Runs:
    def __init__(
        self,
        ctx: Context,
        *,
        interrupt: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.ctx = ctx
        #: The worker's: stop the in-flight task of a run on this process, if any.
        self.interrupt = interrupt

    async def start(
        self,
        skill: str,
        input: str,
        *,
        by: Principal,
        trigger: str | None = None,
        idempotency_key: str | None = None,
    ) -> Run:
        """Start a run of `skill` for `by` (`trigger`: what the run records as having started
        it; by default the principal's channel)."""
        # NotFound for an unknown skill, before anything is written
        if self.ctx.skills.get(skill).inbox_only:
            raise InboxOnly(inbox_only(skill))
        await self._allowed(self.ctx.access.may_start(by, skill), {"skill": skill})
        await self._kill_off()
        now = self.ctx.clock()
        trigger = trigger or by.channel
        # The store hands the run to this process's worker, or wakes it (`HandsOver`).
        return await self.ctx.store.create_run(
            run_id=self.ctx.ids(),
            skill=skill,
            input=input,
            trigger=trigger,
            now=now,
            events=[NewEvent(RunStarted(input=input, trigger=trigger, by=by.actor))],
            idempotency_key=idempotency_key,
        )

    async def follow_up(self, run_id: str, text: str, *, by: Principal) -> Run:
        """Give a run another message; a finished run continues with its whole history."""
        run = await self.ctx.store.get_run(run_id)
        await self._allowed(self.ctx.access.may_follow_up(by, run.skill), {}, run_id=run_id)
        await self._kill_off()
        if run.status in {RunStatus.WAITING}:
            raise Conflict("the run is waiting on a decision; decide that item first")
        event = NewEvent(UserMessage(text=text, by=by.actor, channel=by.channel))
        if run.status in {RunStatus.QUEUED, RunStatus.RUNNING}:
            # The message joins the conversation at the next model call.
            await self.ctx.store.append_events(run_id, [event], lease=None, now=self.ctx.clock())
            return await self.ctx.store.get_run(run_id)
        run = await self.ctx.store.requeue(run_id, now=self.ctx.clock(), events=[event])
        self.ctx.wake_workers()
        return run

    async def cancel(self, run_id: str, *, by: Principal) -> Run:
        run = await self.ctx.store.get_run(run_id)
        await self._allowed(self.ctx.access.may_control(by), {"cancel": run_id}, run_id=run_id)
        if run.status.terminal:
            raise Conflict(f"the run already ended: {run.status}")
        if self.interrupt is not None:
            await self.interrupt(run_id)
        run = await self.ctx.store.get_run(run_id)
        if run.status.terminal:
            return run
        skill = self.ctx.skills.get(run.skill) if run.skill in self.ctx.skills else None
        await finish_run(
            self.ctx,
            run,
            RunStatus.CANCELLED,
            lease=None,
            skill=skill,
            error=f"cancelled by {by.actor} via {by.channel}",
            actor=by.actor,
        )
        await self.ctx.store.audit(
            action="cancel", actor=by.actor, channel=by.channel, now=self.ctx.clock(), run_id=run_id
        )
        return await self.ctx.store.get_run(run_id)

    async def kill(self, *, by: Principal, reason: str | None = None) -> list[str]:
        """Turn the kill switch on: running and queued runs are killed; waiting runs wait on,
        and no decision is taken until it is lifted."""
        await self._allowed(self.ctx.access.may_control(by), {"kill": True})
        actor, channel, now = by.actor, by.channel, self.ctx.clock()
        await self.ctx.store.set_kill(on=True, actor=actor, now=now, reason=reason)
        await self.ctx.store.audit(
            action="kill", actor=actor, channel=channel, now=now, detail={"reason": reason}
        )
        # Whoever waits on a request's answer is told it is halted.
        self.ctx.decisions.ring()
        killed: list[str] = []
        for status in (RunStatus.RUNNING, RunStatus.QUEUED):
            for run_id in await self.ctx.store.runs_with_status(status):
                if self.interrupt is not None:
                    await self.interrupt(run_id)
                run = await self.ctx.store.get_run(run_id)
                if run.status.terminal or run.status is RunStatus.WAITING:
                    continue
                skill = self.ctx.skills.get(run.skill) if run.skill in self.ctx.skills else None
                await finish_run(
                    self.ctx,
                    run,
                    RunStatus.KILLED,
                    lease=None,
                    skill=skill,
                    error=f"killed by {actor} via {channel}",
                    actor=actor,
                )
                killed.append(run_id)
        return killed

    async def lift_kill(self, *, by: Principal) -> None:
        await self._allowed(self.ctx.access.may_control(by), {"kill": False})
        now = self.ctx.clock()
        await self.ctx.store.set_kill(on=False, actor=by.actor, now=now)
        await self.ctx.store.audit(
            action="kill_lifted", actor=by.actor, channel=by.channel, now=now
        )
        self.ctx.wake_workers()

    async def _allowed(
        self, verdict: Verdict, detail: dict[str, object], *, run_id: str | None = None
    ) -> None:
        """Go on when `verdict` allows; else audit the refusal and raise `NotAllowed`."""
        if verdict:
            return
        await audit_refusal(
            self.ctx.store, verdict, now=self.ctx.clock(), run_id=run_id, detail=dict(detail)
        )
        raise NotAllowed(f"{verdict.who.describe()} may not do this: {verdict.why}")

    async def _kill_off(self) -> None:
        kill = await self.ctx.store.get_kill()
        if kill is not None:
            raise KillSwitchOn(kill_reason(kill))
