"""Ending a run: its status, the RUN_FINISHED event, its open actions closed and an Unread
item, in one transaction — so a run is never over without its item in the inbox, and never
has its item without being over.

Used by the engine (a run's answer, failure, halt or stop at the budget) and by the public
entry points that end runs from outside (cancel, the kill switch).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pizzabot.agent import conversation
from pizzabot.agent.context import Context
from pizzabot.agent.events import NewEvent, RunFinished
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Run, RunStatus, Target, Usage
from pizzabot.agent.skills import Skill
from pizzabot.agent.targets import targets_for

__all__ = ["finish_run"]

log = logging.getLogger(__name__)

_VERB = {
    RunStatus.DONE: "finished",
    RunStatus.FAILED: "failed",
    RunStatus.CANCELLED: "was cancelled",
    RunStatus.KILLED: "was killed",
}


async def finish_run(
    ctx: Context,
    run: Run,
    status: RunStatus,
    *,
    lease: str | None,
    skill: Skill | None,
    result: str | None = None,
    error: str | None = None,
    usage: Usage | None = None,
    actor: str | None = None,
    answer: Sequence[NewEvent] = (),
) -> None:
    """End a run: its status, a RUN_FINISHED event, its open actions closed, and an Unread
    item — in one transaction, with `answer` (the model's final answer) recorded first."""
    store, now = ctx.store, ctx.clock()
    if usage is None:
        usage = conversation.derive(await store.events(run.id)).usage
    verb = _VERB.get(status, str(status))
    body = result if status is RunStatus.DONE else (error or verb)
    unread = Item(
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
        lease=lease,
        now=now,
        events=[
            *answer,
            NewEvent(RunFinished(status=status, result=result, error=error, by=actor)),
        ],
        unread=unread,
        targets=_note_targets(skill, ctx.channels),
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


def _note_targets(skill: Skill | None, channels: frozenset[str]) -> list[Target]:
    """Where a run's note goes: the skill's places, but no push (a push is for a card that
    waits on a person)."""
    if skill is None:
        return []
    return [t for t in targets_for(skill, channels) if t.kind != "push"]
