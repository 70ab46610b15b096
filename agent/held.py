"""A run while a worker steps it: the nouns the engine's loop and its tool-call steps share.

Its own module so `pizzabot.agent.engine` (the loop) and `pizzabot.agent.calls` (carrying out tool calls) can
both use it without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pizzabot.agent import conversation
from pizzabot.agent.context import Context
from pizzabot.agent.conversation import RunState
from pizzabot.agent.events import Event, NewEvent
from pizzabot.agent.finish import finish_run
from pizzabot.agent.model import EVENT_SCHEMA_VERSION, Item, Run, RunStatus, Target, Usage
from pizzabot.agent.skills import Skill

__all__ = ["HeldRun", "Outcome"]

#: What a step leaves the loop to do: step again, park the run for a person, or stop.
Outcome = Literal["continue", "wait", "end"]


@dataclass
class HeldRun:
    """A run this worker holds the lease of, while it steps: the run, the lease token every
    write is fenced with, and its event log read once at the held and extended by every
    append, so a step never re-reads the log. Anything another writer appends also takes the
    run away from this holder (cancel, kill: the status changes), so the next fenced append
    fails and the copy is never used stale.

    Every write of the step to its run goes through this object (`append`, `set_status`,
    `park`, `finish`), which is what lets a write wait: a model's reply that asked for tools
    is appended with `defer`, in `events` at once (the state is derived from it) but
    committed with the step's next write, in that write's transaction — usually the first
    call's TOOL_STARTED, one transaction less per step. Nothing is done on the reply's
    account before that write, so a crash in between only loses a reply, and the model is
    asked again, as after a crash during its call. A reply is deferred only until its
    turn's first write, which always comes through here, so no other write (a grant, a
    question closed) ever meets one."""

    run: Run
    skill: Skill
    lease: str
    events: list[Event]
    status: RunStatus = RunStatus.RUNNING  # what the step that ended the loop left
    _deferred: list[NewEvent] = field(default_factory=list)
    _deferred_usage: Usage | None = None

    def state(self) -> RunState:
        return conversation.derive(self.events)

    async def append(
        self,
        ctx: Context,
        events: list[NewEvent],
        *,
        usage: Usage | None = None,
        defer: bool = False,
    ) -> None:
        """Append to the run's log (with what is deferred), fenced with the lease, and keep
        the copy in step; with `defer`, only to the copy, until the step's next write."""
        if defer:
            self._defer(events, usage)
            return
        deferred, deferred_usage = self._take_deferred()
        appended = await ctx.store.append_events(
            self.run.id,
            [*deferred, *events],
            lease=self.lease,
            now=ctx.clock(),
            usage=usage if usage is not None else deferred_usage,
        )
        if appended and self.events and appended[0].seq != self.events[-1].seq + 1:
            # Someone else wrote in between (should not happen while we hold the lease):
            # the durable log is the truth, read it again.
            self.events = await ctx.store.events(self.run.id)
        else:
            self.events.extend(appended)

    async def set_status(self, ctx: Context, status: RunStatus) -> None:
        """Move the run (fenced), after what is deferred."""
        if self._deferred:
            await self.append(ctx, [])
        await ctx.store.set_status(self.run.id, status, lease=self.lease, now=ctx.clock())
        self.status = status

    async def park(
        self,
        ctx: Context,
        cards: Sequence[tuple[Item, Sequence[NewEvent]]],
        *,
        targets: Sequence[Target],
    ) -> None:
        """Put the cards in the inbox and the run to wait, in one transaction, after what is
        deferred (its own, as it carries the run's usage)."""
        if self._deferred:
            await self.append(ctx, [])
        await ctx.store.create_items(
            cards, targets=targets, lease=self.lease, now=ctx.clock(), run_status=RunStatus.WAITING
        )
        self.status = RunStatus.WAITING

    async def finish(
        self,
        ctx: Context,
        status: RunStatus,
        *,
        result: str | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        answer: Sequence[NewEvent] = (),
    ) -> None:
        """End the run (`pizzabot.agent.finish.finish_run`), with what is deferred recorded
        before `answer`."""
        usage = usage or self.state().usage
        deferred, _ = self._take_deferred()
        await finish_run(
            ctx,
            self.run,
            status,
            lease=self.lease,
            skill=self.skill,
            result=result,
            error=error,
            usage=usage,
            answer=[*deferred, *answer],
        )
        self.status = status

    def _defer(self, events: list[NewEvent], usage: Usage | None) -> None:
        """Keep `events` for the next write; they are in `events` with the numbers the next
        append will give them (no one else appends while the lease is held)."""
        last = self.events[-1].seq if self.events else 0
        at = self.events[-1].at if self.events else self.run.created_at
        self.events.extend(
            Event(
                run_id=self.run.id,
                seq=last + 1 + i,
                payload=ev.payload,
                at=at,
                version=EVENT_SCHEMA_VERSION,
            )
            for i, ev in enumerate(events)
        )
        self._deferred.extend(events)
        if usage is not None:
            self._deferred_usage = usage

    def _take_deferred(self) -> tuple[list[NewEvent], Usage | None]:
        """The deferred events (and usage), for a write that commits them itself."""
        deferred, usage = self._deferred, self._deferred_usage
        if deferred:
            del self.events[len(self.events) - len(deferred) :]
        self._deferred, self._deferred_usage = [], None
        return deferred, usage
