"""`notify`: a call that runs at once, and a note that tells its approvers what ran.

A tool (or a rule of it) whose policy is `notify` is judged like any other call
(`pizzabot.agent.policy.call_verdict`: a `deny` rule still wins, the kill switch still stops
the run), and then runs without asking, as `auto` does. After it ran, its approvers get an
FYI: an Unread item (not an Action: there is nothing to decide) on every place the skill
delivers to (Slack, mail, the web page), saying which tool ran, with which arguments, what
it answered and which rule said to notify. The FYI is in the audit trail (`notified`).

Where the skill names an Undo for the tool (`undo:`), the FYI offers it (`pizzabot.agent.undo`):
the FYI then carries the tool and its arguments, so that whoever may decide that tool's cards
may undo it.

A request (`pizzabot.agent.requests`) that a `notify` rule decides is approved at once, and its
approvers get the same FYI, saying who asked.
"""

from __future__ import annotations

import json
from typing import Any

from pizzabot.agent.context import Context
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Undo
from pizzabot.agent.skills import Skill
from pizzabot.agent.targets import targets_for

__all__ = ["MAX_SHOWN", "fyi_item", "notify_approvers"]

#: How much of the arguments and the result an FYI shows.
MAX_SHOWN = 1500


def _clip(text: str) -> str:
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + " …"


def fyi_item(
    ctx: Context,
    skill: Skill,
    *,
    run_id: str,
    tool: str,
    args: dict[str, Any] | None,
    why: str,
    result: str | None = None,
    failed: bool = False,
    asked_by: str | None = None,
    undo: tuple[Undo | None, str | None] = (None, None),
) -> Item:
    """The FYI for a `notify` call of `tool` in run `run_id`; `undo`: the Undo it offers,
    or why it offers none (`pizzabot.agent.undo.offer`)."""
    shown = _clip(json.dumps(args or {}, sort_keys=True, ensure_ascii=False))
    lines = [f"{tool} ran without asking ({why} says notify)."]
    if asked_by is not None:
        lines = [f"{asked_by} asked to run {tool}: approved at once ({why} says notify)."]
    lines.append(f"Arguments: {shown}")
    if result is not None:
        lines.append(f"{'It failed' if failed else 'Result'}: {_clip(result)}")
    offered, why_not = undo
    if why_not is not None:
        lines.append(why_not)
    return Item(
        id=ctx.ids(),
        run_id=run_id,
        skill=skill.name,
        box=Box.UNREAD,
        kind=ItemKind.RUN,
        status=ItemStatus.UNREAD,
        title=f"FYI: {skill.name} ran {tool}",
        body="\n\n".join(lines),
        created_at=ctx.clock(),
        secret=ctx.secrets(),
        tool=tool if offered is not None else None,
        args=dict(args or {}) if offered is not None else None,
        undo=offered,
    )


async def notify_approvers(ctx: Context, skill: Skill, item: Item, *, lease: str | None) -> Item:
    """Put the FYI in the inbox and on its way to the skill's places (no push: nothing
    waits on a person), with its audit entry."""
    targets = [t for t in targets_for(skill, ctx.channels) if t.kind != "push"]
    now = ctx.clock()
    made = await ctx.store.create_item(item, targets=targets, lease=lease, now=now)
    await ctx.store.audit(
        action="notified",
        actor="policy",
        channel="engine",
        now=now,
        run_id=item.run_id,
        item_id=made.id,
        detail={"title": item.title, "to": [t.address for t in targets]},
    )
    ctx.wake_outbox()
    return made
