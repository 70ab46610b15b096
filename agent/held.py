"""A run while a worker steps it: the nouns the engine's loop and its tool-call steps share.

Its own module so `agent.engine` (the loop) and `agent.calls` (carrying out tool calls) can
both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent import conversation
from agent.context import Context
from agent.conversation import RunState
from agent.model import Event, NewEvent, Run, RunStatus, Usage
from agent.skills import Skill

__all__ = ["HeldRun", "Outcome"]

#: What a step leaves the loop to do: step again, park the run for a person, or stop.
Outcome = Literal["continue", "wait", "end"]


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

    async def append(
        self, ctx: Context, events: list[NewEvent], *, usage: Usage | None = None
    ) -> None:
        """Append to the run's log, fenced with the lease, and keep the copy in step."""
        appended = await ctx.store.append_events(
            self.run.id, events, lease=self.lease, now=ctx.clock(), usage=usage
        )
        if appended and self.events and appended[0].seq != self.events[-1].seq + 1:
            # Someone else wrote in between (should not happen while we hold the lease):
            # the durable log is the truth, read it again.
            self.events = await ctx.store.events(self.run.id)
        else:
            self.events.extend(appended)
