"""Approval time-outs, reminders and escalation: the clock's part in the inbox.

A loop looks at the pending action items whose tool rule (in the skill) has `timeout`,
`remind_after` or `escalate_after`, and acts once the item is old enough:

- `timeout`: the item is closed as expired in every channel's copy (`Inbox.expire`). With
  `on_timeout: reject` the model is told plainly that no one answered and that it must not
  work around it; with `on_timeout: halt` the run stops and an Unread item says why.
- `remind_after`: the item is sent again to the same places, once.
- `escalate_after`: the item is sent to `escalate_to`, once; those approvers may decide it.

A request from an agent (`pizzabot.agent.requests`) may set its own `timeout`, which wins over its
tool's; an expired request is never a halt (its run has nothing to stop).

The loop sleeps until the next thing is due, at most `interval`, and a new item with a
time-out wakes it (`Context.wake_timers`): a request that may wait 3 s expires after 3 s,
not at the next pass. Ages come from the injected clock, so tests need not wait. Each act happens once however many
servers run this loop: expiry is the inbox's conditional update (the first decision wins), and
a reminder or an escalation is claimed by a unique row in the `ItemTimers` store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Literal

from pizzabot.agent.away_cards import delegated_targets
from pizzabot.agent.context import Context
from pizzabot.agent.errors import AlreadyDecided
from pizzabot.agent.events import NewEvent, Note, TimerRemark
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Target
from pizzabot.agent.skills import Skill, ToolRule
from pizzabot.agent.store import ItemTimers
from pizzabot.agent.targets import deliver_targets, targets_for
from pizzabot.agent.tasks import stop_if_cancelled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TimerAction:
    item_id: str
    kind: Literal["expired", "halted", "reminded", "escalated"]


def human_duration(seconds: float) -> str:
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def expiry_message(tool: str, timeout: float, *, halt: bool) -> str:
    """What the model (and the run's trace) reads when no one answered in time."""
    base = (
        f"No one answered the approval request for this call to {tool} within "
        f"{human_duration(timeout)}, so the call was not made"
    )
    if halt:
        return f"{base}, and the run was stopped (on_timeout: halt)."
    return (
        f"{base}. Treat it as refused: do not retry it and do not try to reach the same result "
        "another way (another tool, or the same action split up). Carry on without it, and say "
        "in your answer what was not done because no one approved it."
    )


def _timed(item: Item, skill: Skill) -> bool:
    """Items the clock looks after: the engine's tool calls, and every item of a request
    (a request's question too: its skill is inbox-only)."""
    if skill.inbox_only:
        return item.kind in (ItemKind.TOOL, ItemKind.QUESTION)
    return item.kind is ItemKind.TOOL and bool(item.tool)


class Timers:
    def __init__(
        self, ctx: Context, inbox: Inbox, store: ItemTimers, *, interval: float = 30.0
    ) -> None:
        self.ctx = ctx
        self.inbox = inbox
        self.store = store
        self.interval = interval
        self._bell = asyncio.Event()
        #: Seconds from the last pass until the next time-out, reminder or escalation is due.
        self.next_due: float | None = None

    def wake(self) -> None:
        """Look again now: something new may be due before the loop would next look."""
        self._bell.set()

    async def run_forever(self) -> None:
        while True:
            stop_if_cancelled()
            self._bell.clear()
            try:
                await self.tick()
            except Exception:
                log.exception("approval timers pass failed")
            pause = self.interval if self.next_due is None else min(self.interval, self.next_due)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._bell.wait(), max(0.01, pause))

    async def tick(self) -> list[TimerAction]:
        """Act on every pending action item whose time has come; return what was done."""
        items = [
            i
            for i in await self.ctx.store.list_items(
                box=Box.ACTION, status=ItemStatus.PENDING, limit=10_000
            )
            if i.skill in self.ctx.skills and _timed(i, self.ctx.skills.get(i.skill))
        ]
        done = await self.store.timers_done([i.id for i in items])
        # A request may set its own time-out, over its tool's.
        timeouts = await self.ctx.store.request_timeouts([i.id for i in items])
        actions: list[TimerAction] = []
        self.next_due = None
        for item in items:
            skill = self.ctx.skills.get(item.skill)
            rule = skill.rule(item.tool or "ask_human")  # a question names no tool
            if item.id in timeouts:
                rule = rule.model_copy(
                    update={"timeout": timeouts[item.id], "on_timeout": "reject"}
                )
            actions.extend(await self._item(item, skill, rule, done))
            self._note_due(item, rule)
        if any(a.kind in {"reminded", "escalated"} for a in actions):
            self.ctx.wake_outbox()
        return actions

    def _note_due(self, item: Item, rule: ToolRule) -> None:
        """Keep the soonest moment one of the item's times comes, for the loop's sleep."""
        age = (self.ctx.clock() - item.created_at).total_seconds()
        for after in (rule.timeout, rule.remind_after, rule.escalate_after):
            if after is not None and after > age:
                left = after - age
                self.next_due = left if self.next_due is None else min(self.next_due, left)

    async def _item(
        self, item: Item, skill: Skill, rule: ToolRule, done: set[tuple[str, str]]
    ) -> list[TimerAction]:
        age = (self.ctx.clock() - item.created_at).total_seconds()
        tool = item.tool or ""
        if rule.timeout is not None and age >= rule.timeout:
            halt = rule.on_timeout == "halt" and not skill.inbox_only
            reason = expiry_message(tool, rule.timeout, halt=halt)
            if skill.inbox_only:  # a request: the requester reads it, not a model
                reason = f"no one answered within {human_duration(rule.timeout)}"
            with contextlib.suppress(AlreadyDecided):  # someone decided a moment earlier
                await self.inbox.expire(item.id, reason=reason, halt=halt)
                log.info("item %s expired after %s", item.id, human_duration(rule.timeout))
                return [TimerAction(item.id, "halted" if halt else "expired")]
            return []
        actions: list[TimerAction] = []
        escalation = rule.escalate_to
        if (
            rule.escalate_after is not None
            and escalation is not None
            and age >= rule.escalate_after
            and (item.id, "escalate") not in done
        ):
            targets = deliver_targets(escalation, self.ctx.channels)
            remark = TimerRemark(
                item_id=item.id,
                tool=tool,
                after=human_duration(rule.escalate_after),
                targets=[f"{t.kind}:{t.address}" for t in targets],
                approvers=escalation.approvers.model_dump(),
            )
            if await self._once(item, "escalate", targets, Note(escalated=remark)):
                actions.append(TimerAction(item.id, "escalated"))
        if (
            rule.remind_after is not None
            and age >= rule.remind_after
            and (item.id, "remind") not in done
        ):
            # A reminder follows the card: to an away approver's delegate (its text is the card's).
            targets = await delegated_targets(
                self.ctx, skill, tool, targets_for(skill, self.ctx.channels)
            )
            remark = TimerRemark(
                item_id=item.id,
                tool=tool,
                after=human_duration(rule.remind_after),
                targets=[f"{t.kind}:{t.address}" for t in targets],
            )
            if await self._once(item, "remind", targets, Note(reminder=remark)):
                actions.append(TimerAction(item.id, "reminded"))
        return actions

    async def _once(self, item: Item, kind: str, targets: list[Target], note: Note) -> bool:
        if not targets:
            return False  # no configured channel to send it to: nothing to record either
        return await self.store.add_deliveries_once(
            item.id,
            kind=kind,
            targets=targets,
            note=NewEvent(note),
            now=self.ctx.clock(),
        )
