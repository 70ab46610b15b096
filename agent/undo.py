"""Undo on a `notify` FYI: the compensating call a person starts with one click.

A tool whose FYI offers Undo names its compensating tool in the skill (`undo:`,
`pizzabot.agent.skills.undo`). When the FYI is made (`offer`), the compensating call's
arguments are filled from the call that ran and its answer, and the FYI carries them
(`Item.undo`); where they cannot be filled (the answer lacks a field), the FYI says why and
offers no Undo.

`undo` is the one function every channel calls (web page, Slack, mail link, the API, the
CLI). Whoever may decide the tool's cards may undo (`pizzabot.agent.policy.access`); an Undo
runs at most once (the store takes it with a conditional update, and a second click is told
who undid it); the kill switch refuses it; and the person's click is the approval of the
compensating call, so its own policy asks nobody else, save that a `deny` of the skill's
rules for it still refuses it. The call goes to the tool's MCP server as every call does,
and how it ended (its answer, or its error) shows on every copy of the card. The audit
trail has `undone` (who, the call, how it ended) and `undo_refused`.

The call is made with the process's `Previewer` (`pizzabot.agent.preview`): its tools and its
redaction, the engine's one way to call a tool outside a run (every `pizzabot serve` has
one, with or without a worker). Where there is none, an Undo is refused before it is taken.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, assert_never

from pizzabot.agent.context import Context
from pizzabot.agent.errors import AlreadyUndone, Conflict, KillSwitchOn, NotAllowed
from pizzabot.agent.model import Item, Undo
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.rules import judge
from pizzabot.agent.skills import Skill
from pizzabot.agent.skills.undo import fill
from pizzabot.agent.store import kill_reason

__all__ = ["offer", "undo", "undo_line"]


def offer(
    skill: Skill, tool: str, args: Mapping[str, Any], result: str, *, failed: bool
) -> tuple[Undo | None, str | None]:
    """The Undo an FYI of `tool`'s call offers (None: none), and why it offers none where
    the skill names one: the call failed, or its answer lacks what the arguments need."""
    call = skill.rule(tool).undo
    if call is None:
        return None, None
    if failed:
        return None, f"No Undo: {tool} failed, so there is nothing to undo."
    try:
        return Undo(tool=call.tool, args=fill(call, args, result)), None
    except ValueError as exc:
        return None, f"No Undo: the arguments of {call.tool} cannot be filled ({exc})."


async def undo(ctx: Context, item_id: str, *, by: Principal) -> Item:
    """Run the compensating call `item_id`'s FYI offers, as `by`: the item, with how it
    ended. Raises `NotAllowed`, `AlreadyUndone`, `KillSwitchOn`, `Conflict` (no Undo here,
    or its tool's policy denies it), `NotFound`."""
    store = ctx.store
    item = await store.get_item(item_id)
    if item.undo is None:
        raise Conflict("this item offers no Undo")
    verdict = ctx.access.may_decide(by, item)
    if not verdict:
        await _refused(ctx, item, by, verdict.why)
        raise NotAllowed(f"{by.describe()} may not undo this: {verdict.why}")
    if item.undo.state != "offered":
        raise AlreadyUndone(item)
    kill = await store.get_kill()
    if kill is not None:
        refused = KillSwitchOn(kill_reason(kill))
        await _refused(ctx, item, by, str(refused))
        raise refused
    skill = ctx.skills.get(item.skill)
    ruling = judge(skill, item.undo.tool, item.undo.args)
    if ruling.policy == "deny":
        await _refused(ctx, item, by, ruling.refusal())
        raise Conflict(f"Undo refused: {ruling.refusal()}")
    if ctx.previews is None:
        raise Conflict("this process calls no tools, so it cannot undo")
    taken = await store.start_undo(item.id, by=by.actor, via=by.channel, now=ctx.clock())
    assert taken.undo is not None
    ok, outcome = await ctx.previews.call(skill, taken.undo.tool, taken.undo.args)
    ended = await store.finish_undo(item.id, ok=ok, outcome=outcome, now=ctx.clock())
    await store.audit(
        action="undone",
        actor=by.actor,
        channel=by.channel,
        now=ctx.clock(),
        run_id=item.run_id,
        item_id=item.id,
        detail={"tool": taken.undo.tool, "args": taken.undo.args, "ok": ok, "outcome": outcome},
    )
    ctx.wake_outbox()
    return ended


def undo_line(undo: Undo) -> str:
    """How every copy of the card words the Undo: what it would run while it is offered
    (beside its button), then who started it and how it ended."""
    at = f" at {undo.at.strftime('%Y-%m-%d %H:%M UTC')}" if undo.at is not None else ""
    who = f"{undo.by or 'someone'} via {undo.via or '?'}{at}"
    match undo.state:
        case "offered":
            return f"Undo offered: {undo.tool} with {_args_text(undo.args)}"
        case "running":
            return f"↩️ Undo under way: {undo.tool}, started by {who}"
        case "done":
            return f"↩️ Undone by {who}: {undo.tool} answered: {undo.outcome or '(nothing)'}"
        case "failed":
            return f"⚠️ Undo failed (started by {who}): {undo.tool}: {undo.outcome or '?'}"
        case _:
            assert_never(undo.state)


def _args_text(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True, ensure_ascii=False)


async def _refused(ctx: Context, item: Item, by: Principal, why: str) -> None:
    await ctx.store.audit(
        action="undo_refused",
        actor=by.actor,
        channel=by.channel,
        now=ctx.clock(),
        run_id=item.run_id,
        item_id=item.id,
        detail={"tool": item.undo.tool if item.undo else None, "why": why},
    )
