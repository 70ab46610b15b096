"""How a decision ends a request's run: in the decision's own transaction (`request_end`),
then the grant an approval asked for and the end-of-run hook (`request_ended`); and the
engine's step for a run of an inbox-only skill, which only finds it waiting or ends one that
was decided while it was not (`answer_request`). A request's run has nothing left to do once
its item is decided, so no model is called and no Unread note is made: the requester has its
answer (`pizzabot.agent.requests`)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from pizzabot.agent.context import Context
from pizzabot.agent.errors import UserError
from pizzabot.agent.events import DecisionMade, NewEvent, RunFinished, ToolRequest
from pizzabot.agent.held import HeldRun
from pizzabot.agent.model import DECIDED_STATUS, Approve, Decision, Item, ItemStatus, RunStatus
from pizzabot.agent.policy.grants import make_grant
from pizzabot.agent.request_state import outcome_text
from pizzabot.agent.skills import inbox_only
from pizzabot.agent.store import RunEnd

__all__ = ["answer_request", "request_end", "request_ended"]

log = logging.getLogger(__name__)


def request_end(
    item: Item, decision: Decision, final_args: dict[str, Any] | None, *, by: str, via: str
) -> RunEnd | None:
    """How a decision on a request's item ends its run, in the decision's own transaction
    (None: the item is not a request's). A request's run has nothing left to do once its
    item is decided: DONE, its result the decision in words."""
    if not item.requested:
        return None
    decided = replace(
        item,
        status=DECIDED_STATUS[decision.kind],
        decided_by=by,
        decided_via=via,
        final_args=final_args,
        reason=getattr(decision, "reason", None) or None,
    )
    text = outcome_text(decided)
    return RunEnd(text, NewEvent(RunFinished(status=RunStatus.DONE, result=text)))


async def request_ended(ctx: Context, item: Item, decision: Decision, *, by: str, via: str) -> bool:
    """After a decision that may have ended a request's run: keep the grant an approval
    asked for ("1h", "exact"), and run the end-of-run hook. False: the run did not end
    (it was not waiting), and the engine ends it (`answer_request`)."""
    run = await ctx.store.get_run(item.run_id)
    if run.status is not RunStatus.DONE:
        return False
    choice = decision.grant if isinstance(decision, Approve) else None
    if choice is not None:
        await _keep_grant(ctx, run.skill, item, choice, by=by, via=via)
    await _run_ended(ctx, run.id)
    return True


async def answer_request(ctx: Context, held: HeldRun) -> RunStatus:
    """The engine's step for a run of an inbox-only skill: a decision ends such a run in its
    own transaction (`request_end`), so this only finds it waiting, or ends one that was
    decided while it was not waiting (no model is called, no Unread note is made: the
    requester has its answer)."""
    store, run, now = ctx.store, held.run, ctx.clock()
    asked = [e.payload for e in held.events if isinstance(e.payload, ToolRequest)]
    if not asked:
        raise UserError(inbox_only(run.skill))
    item = await store.get_item(asked[-1].item_id)
    if item.status is ItemStatus.PENDING:
        await store.set_status(run.id, RunStatus.WAITING, lease=held.lease, now=now)
        return RunStatus.WAITING
    decided = [
        e.payload
        for e in held.events
        if isinstance(e.payload, DecisionMade) and e.payload.item_id == item.id
    ]
    if decided and isinstance(decided[-1].decision, Approve) and decided[-1].decision.grant:
        last = decided[-1]
        choice = decided[-1].decision.grant
        await _keep_grant(ctx, run.skill, item, choice, by=last.actor, via=last.channel)
    text = outcome_text(item)
    finished = NewEvent(RunFinished(status=RunStatus.DONE, result=text))
    await store.finish_request(run.id, lease=held.lease, now=now, events=[finished], result=text)
    await _run_ended(ctx, run.id)
    return RunStatus.DONE


async def _run_ended(ctx: Context, run_id: str) -> None:
    if ctx.on_run_end is not None:
        try:
            await ctx.on_run_end(run_id)
        except Exception:
            log.warning("run %s: the end-of-run hook failed", run_id, exc_info=True)


async def _keep_grant(
    ctx: Context, skill: str, item: Item, choice: str, *, by: str, via: str
) -> None:
    """An approval that asked for a grant ("1h", "exact") makes it, once per item."""
    if ctx.grants is None or item.tool is None:
        return
    grant = make_grant(
        choice,
        id=ctx.ids(),
        skill=skill,
        tool=item.tool,
        args=item.final_args or {},
        run_id=item.run_id,
        item_id=item.id,
        granted_by=by,
        granted_via=via,
        now=item.decided_at or ctx.clock(),
    )
    await ctx.grants.add(grant)
