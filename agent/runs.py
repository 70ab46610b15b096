"""Starting, following up, cancelling and killing runs: the engine's public entry points.

Every trigger (CLI, API, web, Slack, email, schedule, webhook) ends here. These functions
only write rows and wake a worker, or hand a new run straight to this process's worker
(claimed in the transaction that creates it); the work happens in `agent.engine`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agent.context import Context
from agent.errors import Conflict, InboxOnly, KillSwitchOn
from agent.events import RunStarted, UserMessage
from agent.finish import finish_run
from agent.model import NewEvent, Run, RunStatus
from agent.skills import inbox_only
from agent.store import Handover


class Runs:
    def __init__(
        self,
        ctx: Context,
        *,
        interrupt: Callable[[str], Awaitable[None]] | None = None,
        handover: Handover | None = None,
    ) -> None:
        self.ctx = ctx
        #: The worker's: stop the in-flight task of a run on this process, if any.
        self.interrupt = interrupt
        self.handover = handover

    async def start(
        self,
        skill: str,
        input: str,
        *,
        trigger: str = "api",
        actor: str = "owner",
        idempotency_key: str | None = None,
    ) -> Run:
        # NotFound for an unknown skill, before anything is written
        if self.ctx.skills.get(skill).inbox_only:
            raise InboxOnly(inbox_only(skill))
        if await self.ctx.store.get_kill() is not None:
            raise KillSwitchOn()
        now = self.ctx.clock()
        take = self.handover.offer() if self.handover is not None else None
        run = await self.ctx.store.create_run(
            run_id=self.ctx.ids(),
            skill=skill,
            input=input,
            trigger=trigger,
            now=now,
            events=[NewEvent(RunStarted(input=input, trigger=trigger, by=actor))],
            idempotency_key=idempotency_key,
            take=take,
        )
        if take is not None and take.claimed is not None:
            assert self.handover is not None
            self.handover.start(take)
        else:
            self.ctx.wake_workers()
        return run

    async def follow_up(
        self, run_id: str, text: str, *, actor: str = "owner", channel: str = "api"
    ) -> Run:
        """Give a run another message; a finished run continues with its whole history."""
        if await self.ctx.store.get_kill() is not None:
            raise KillSwitchOn()
        run = await self.ctx.store.get_run(run_id)
        if run.status in {RunStatus.WAITING}:
            raise Conflict("the run is waiting on a decision; decide that item first")
        event = NewEvent(UserMessage(text=text, by=actor, channel=channel))
        if run.status in {RunStatus.QUEUED, RunStatus.RUNNING}:
            # The message joins the conversation at the next model call.
            await self.ctx.store.append_events(run_id, [event], lease=None, now=self.ctx.clock())
            return await self.ctx.store.get_run(run_id)
        run = await self.ctx.store.requeue(run_id, now=self.ctx.clock(), events=[event])
        self.ctx.wake_workers()
        return run

    async def cancel(self, run_id: str, *, actor: str = "owner", channel: str = "api") -> Run:
        run = await self.ctx.store.get_run(run_id)
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
            error=f"cancelled by {actor} via {channel}",
            actor=actor,
        )
        await self.ctx.store.audit(
            action="cancel", actor=actor, channel=channel, now=self.ctx.clock(), run_id=run_id
        )
        return await self.ctx.store.get_run(run_id)

    async def kill(self, *, actor: str = "owner", channel: str = "api") -> list[str]:
        """Turn the kill switch on: running and queued runs are killed; waiting runs wait on."""
        now = self.ctx.clock()
        await self.ctx.store.set_kill(on=True, actor=actor, now=now)
        await self.ctx.store.audit(action="kill", actor=actor, channel=channel, now=now)
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

    async def lift_kill(self, *, actor: str = "owner", channel: str = "api") -> None:
        now = self.ctx.clock()
        await self.ctx.store.set_kill(on=False, actor=actor, now=now)
        await self.ctx.store.audit(action="kill_lifted", actor=actor, channel=channel, now=now)
        self.ctx.wake_workers()
