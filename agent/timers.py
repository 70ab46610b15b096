"""Approval time-outs, reminders and escalation: the clock's part in the inbox.

A loop looks at the pending action items and walks each one's escalation ladder
(`pizzabot.agent.escalation.ladder`: `timeout`, `remind_after`, `escalate_after` and the steps
of `escalate:`; those of the tool's rule that asked, when it has its own), acting on each step
once the item is old enough:

- an end (`timeout`, `then:`): the item is closed as expired in every channel's copy
  (`Inbox.expire`). On a reject the model is told plainly that no one answered and that it
  must not work around it; on a halt the run stops and an Unread item says why.
- a reminder: the item is sent again to the same places, once.
- a widening (`escalate_to`, `to:`): the item is sent to those people, once; they may decide it.

It also sends each card to whoever is on call now in a rota or shift group that may decide it
(once per person and shift), so a hand-over reaches the new person. Every step and hand-over
is in the audit trail (`approval_reminded`, `approval_escalated`, `approval_on_call`).

A request from an agent (`pizzabot.agent.requests`) may set its own `timeout`, which wins over its
tool's; an expired request is never a halt (its run has nothing to stop).

The loop sleeps until the next thing is due, at most `interval`, and a new item with a
time-out wakes it (`Context.wake_timers`): a request that may wait 3 s expires after 3 s,
not at the next pass. Most looks read only the items made since the last look (and a second
before it, for one committed while that look read): the others' next moment is already
known, and reading every waiting item each time would make filing a request, and every
decision meanwhile, slower the more items wait. A whole pass, which reads every waiting item
and finds each one's next moment again, comes when a moment is due, when the skills were
loaded again (a rule's time-out may have changed), and at least every `whole_every` (five
minutes), for an item another process committed more than a second after its stamp. Ages
come from the injected clock, so tests need not wait. A pass reads the pending items a page
at a time (`PAGE`), so what it holds does not grow with the number waiting, and a decision
is not held up for the whole pass. Each act happens once however many servers run this
loop: expiry is the inbox's conditional update (the first decision wins), and a reminder or
an escalation is claimed by a unique row in the `ItemTimers` store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from pizzabot.agent.away_cards import delegated_people, delegated_targets
from pizzabot.agent.context import Context
from pizzabot.agent.errors import AlreadyDecided
from pizzabot.agent.escalation import Rung, Turn, ladder, on_call_turns, person_targets
from pizzabot.agent.events import NewEvent, Note, TimerRemark
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Box, Item, ItemKind, ItemStatus, Target
from pizzabot.agent.policy.rules import asking_rule
from pizzabot.agent.skills import Skill, ToolRule
from pizzabot.agent.store import ItemTimers
from pizzabot.agent.targets import deliver_targets, targets_for
from pizzabot.agent.tasks import stop_if_cancelled

log = logging.getLogger(__name__)

#: Seconds before the last pass a wake still looks back: an item stamped just before that
#: pass but committed while it read is new to the loop too (its wake comes after its commit).
_OVERLAP = 1.0

#: Seconds between whole passes when nothing is due sooner.
WHOLE_EVERY = 300.0

#: Pending items read at once by a pass: a page is what the loop does between two turns of
#: other work (a decision), ~10 ms on a small machine.
PAGE = 100


@dataclass(frozen=True)
class TimerAction:
    item_id: str
    kind: Literal["expired", "halted", "reminded", "escalated", "on_call"]


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


def _said(targets: list[Target]) -> list[str]:
    return [f"{t.kind}:{t.address}" for t in targets]


def _whom(rung: Rung, people: list[str]) -> str:
    """Who a widening reached, as the card says it: "group:leads (carol)"."""
    if not rung.to:  # the old `escalate_to`
        return ", ".join(people) or "escalate_to"
    named = ", ".join(rung.to)
    return f"{named} ({', '.join(people)})" if people and list(rung.to) != people else named


def _timed(item: Item, skill: Skill) -> bool:
    """Items the clock looks after: the engine's tool calls, and every item of a request
    (a request's question too: its skill is inbox-only)."""
    if skill.inbox_only:
        return item.kind in (ItemKind.TOOL, ItemKind.QUESTION)
    return item.kind is ItemKind.TOOL and bool(item.tool)


class _PassRules:
    """The rule each item's clock follows, worked out once per skill and tool in a pass (a
    tool's rules can only differ by arguments where one of them has a ladder of its own): a
    pass over many waiting items of a few tools would otherwise build the same rules again
    for every item."""

    def __init__(self) -> None:
        # Kept with the skill they were worked out from: a skill reloaded mid-pass is new.
        self._by_args: dict[tuple[str, str | None], tuple[Skill, bool]] = {}
        self._rules: dict[tuple[str, str | None, int | None], tuple[Skill, ToolRule]] = {}

    def of(self, skill: Skill, item: Item) -> tuple[int | None, ToolRule]:
        key = (skill.name, item.tool)
        known = self._by_args.get(key)
        if known is None or known[0] is not skill:
            listed = skill.entry(item.tool) if item.tool else None
            known = skill, listed is not None and any(r.has_ladder for r in listed[1].rules)
            self._by_args[key] = known
        # The rule that asked may have a ladder of its own, over its tool's.
        asked = asking_rule(skill, item.tool, item.args) if known[1] else None
        cached = self._rules.get((*key, asked))
        if cached is None or cached[0] is not skill:
            rule = skill.rule(item.tool or "ask_human").asked_by(asked)  # a question: no tool
            cached = self._rules[(*key, asked)] = skill, rule
        return asked, cached[1]


class Timers:
    def __init__(
        self,
        ctx: Context,
        inbox: Inbox,
        store: ItemTimers,
        *,
        interval: float = 30.0,
        whole_every: float = WHOLE_EVERY,
    ) -> None:
        self.ctx = ctx
        self.inbox = inbox
        self.store = store
        self.interval = interval
        self.whole_every = max(whole_every, interval)
        self._bell = asyncio.Event()
        #: Seconds from the last pass until the next time-out, reminder or escalation is due.
        self.next_due: float | None = None
        #: When the last whole pass began, the last pass of any kind began, and the next
        #: moment they found.
        self._whole_at: datetime | None = None
        self._seen_at: datetime | None = None
        self._due_at: datetime | None = None
        #: The skills' generation the last whole pass worked its moments out from.
        self._skills_seen: int | None = None

    def wake(self) -> None:
        """Look again now: something new may be due before the loop would next look."""
        self._bell.set()

    async def run_forever(self) -> None:
        while True:
            stop_if_cancelled()
            self._bell.clear()
            try:
                await self.tick(new_only=True)  # a whole pass when one is due
            except Exception:
                log.exception("approval timers pass failed")
            pause = self.interval if self.next_due is None else min(self.interval, self.next_due)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._bell.wait(), max(0.01, pause))

    async def tick(self, *, new_only: bool = False) -> list[TimerAction]:
        """Act on every pending action item whose time has come (`new_only`: of those made
        since the last look, unless a whole pass is due); return what was done."""
        now = self.ctx.clock()
        since = None
        if new_only and self._seen_at is not None and not self._whole_due(now):
            since = self._seen_at - timedelta(seconds=_OVERLAP)
        self._seen_at = now
        if since is None:  # a whole pass: every waiting item's next moment is found again
            self._whole_at, self._due_at = now, None
            self._skills_seen = self.ctx.skills.generation
        actions: list[TimerAction] = []
        rules = _PassRules()
        async for page in self._pending(since):
            actions.extend(await self._page(page, rules, now))
        due = self._due_at
        self.next_due = None if due is None else max(0.0, (due - now).total_seconds())
        if any(a.kind in {"reminded", "escalated", "on_call"} for a in actions):
            self.ctx.wake_outbox()
        return actions

    async def _pending(self, since: datetime | None) -> AsyncIterator[list[Item]]:
        """The pending action items (made after `since`), a page at a time, newest first:
        only a page is in memory at once, however many wait, and other work (a decision)
        runs between pages."""
        before: tuple[datetime, str] | None = None
        while True:
            page = await self.ctx.store.list_items(
                box=Box.ACTION,
                status=ItemStatus.PENDING,
                limit=PAGE,
                created_after=since,
                before=before,
            )
            if page:
                yield page
            if len(page) < PAGE:
                return
            before = (page[-1].created_at, page[-1].id)
            await asyncio.sleep(0)

    async def _page(self, page: list[Item], rules: _PassRules, now: datetime) -> list[TimerAction]:
        skills = self.ctx.skills
        items = [i for i in page if i.skill in skills and _timed(i, skills.get(i.skill))]
        if not items:
            return []
        done = await self.store.timers_done([i.id for i in items])
        # A request may set its own time-out, over its tool's.
        timeouts = await self.ctx.store.request_timeouts([i.id for i in items])
        actions: list[TimerAction] = []
        for item in items:
            skill = skills.get(item.skill)
            asked, rule = rules.of(skill, item)
            if item.id in timeouts:
                rule = rule.model_copy(
                    update={"timeout": timeouts[item.id], "on_timeout": "reject"}
                )
            actions.extend(await self._item(item, skill, rule, done, asked))
            self._note_due(item, rule, skill, now, asked)
        return actions

    def _whole_due(self, now: datetime) -> bool:
        """Whether a whole pass is due however the loop woke: a step's moment has come, the
        skills were loaded again, or `whole_every` has passed."""
        if self._whole_at is None or (now - self._whole_at).total_seconds() >= self.whole_every:
            return True
        if self._skills_seen != self.ctx.skills.generation:
            return True
        return self._due_at is not None and now >= self._due_at

    def _note_due(
        self, item: Item, rule: ToolRule, skill: Skill, now: datetime, asked: int | None
    ) -> None:
        """Keep the soonest moment one of the item's steps comes, or a shift hands over, for
        the loop's sleep."""
        age = (now - item.created_at).total_seconds()
        dues = [now + timedelta(seconds=r.after - age) for r in ladder(rule) if r.after > age]
        turns = on_call_turns(skill, item.tool or "", at=now, asked_at=item.created_at, asked=asked)
        dues += [t.until for t in turns if t.until is not None]
        for due in dues:
            self._due_at = due if self._due_at is None else min(self._due_at, due)

    async def _item(
        self,
        item: Item,
        skill: Skill,
        rule: ToolRule,
        done: set[tuple[str, str]],
        asked: int | None,
    ) -> list[TimerAction]:
        age = (self.ctx.clock() - item.created_at).total_seconds()
        rungs = ladder(rule)
        end = next((r for r in rungs if r.act == "end"), None)
        if end is not None and age >= end.after:
            return await self._end(item, skill, end)
        actions: list[TimerAction] = []
        for rung in rungs:
            if rung.act == "end" or age < rung.after or (item.id, rung.key) in done:
                continue
            if await self._step(item, skill, rung):
                actions.append(
                    TimerAction(item.id, "reminded" if rung.act == "remind" else "escalated")
                )
        at = self.ctx.clock()
        for turn in on_call_turns(
            skill, item.tool or "", at=at, asked_at=item.created_at, asked=asked
        ):
            if (item.id, turn.key) not in done and await self._hand_over(item, skill, turn):
                actions.append(TimerAction(item.id, "on_call"))
        return actions

    async def _end(self, item: Item, skill: Skill, end: Rung) -> list[TimerAction]:
        halt = end.halt and not skill.inbox_only
        reason = expiry_message(item.tool or "", end.after, halt=halt)
        if skill.inbox_only:  # a request: the requester reads it, not a model
            reason = f"no one answered within {human_duration(end.after)}"
        with contextlib.suppress(AlreadyDecided):  # someone decided a moment earlier
            await self.inbox.expire(item.id, reason=reason, halt=halt)
            log.info("item %s expired after %s", item.id, human_duration(end.after))
            return [TimerAction(item.id, "halted" if halt else "expired")]
        return []

    async def _step(self, item: Item, skill: Skill, rung: Rung) -> bool:
        """Remind or widen once; audited with who it went to."""
        after, tool, channels = human_duration(rung.after), item.tool or "", self.ctx.channels
        if rung.act == "remind":
            # A reminder follows the card: to an away approver's delegate.
            targets = await delegated_targets(self.ctx, skill, tool, targets_for(skill, channels))
            remark = TimerRemark(item_id=item.id, tool=tool, after=after, targets=_said(targets))
            note, people = Note(reminder=remark), list[str]()
        elif rung.escalation is not None:
            targets = deliver_targets(rung.escalation, channels)
            approvers = rung.escalation.approvers.model_dump()
            remark = TimerRemark(
                item_id=item.id, tool=tool, after=after, targets=_said(targets), approvers=approvers
            )
            named = skill.named(rung.escalation.approvers.people, self.ctx.clock())
            note, people = Note(escalated=remark), named
        else:
            people = skill.named(rung.to, self.ctx.clock())
            targets = await delegated_people(
                self.ctx, skill, people, person_targets(skill, people, channels)
            )
            remark = TimerRemark(
                item_id=item.id,
                tool=tool,
                after=after,
                targets=_said(targets),
                approvers={"people": list(rung.to)},
            )
            note = Note(escalated=remark)
        action = "approval_reminded" if rung.act == "remind" else "approval_escalated"
        detail = {"step": rung.key, "after": after, "to": list(rung.to), "people": people}
        shown = (
            f"{after}: reminder"
            if rung.act == "remind"
            else f"{after}: sent to {_whom(rung, people)}"
        )
        audit = (action, {**detail, "targets": _said(targets)})
        return await self._once(item, rung.key, targets, note, shown=shown, audit=audit)

    async def _hand_over(self, item: Item, skill: Skill, turn: Turn) -> bool:
        """Send the card to whoever is on call now, once per shift; the audit names them."""
        targets = await delegated_people(
            self.ctx, skill, [turn.person], person_targets(skill, [turn.person], self.ctx.channels)
        )
        remark = TimerRemark(
            item_id=item.id,
            tool=item.tool or "",
            after="on call",
            targets=_said(targets),
            approvers={"group": turn.group, "people": [turn.person]},
        )
        detail = {
            "group": turn.group,
            "person": turn.person,
            "since": turn.since.isoformat() if turn.since else None,
            "until": turn.until.isoformat() if turn.until else None,
            "targets": _said(targets),
        }
        shown = f"on call in {turn.group}: {turn.person}"
        audit = ("approval_on_call", detail)
        return await self._once(
            item, turn.key, targets, Note(on_call=remark), shown=shown, audit=audit
        )

    async def _once(
        self,
        item: Item,
        kind: str,
        targets: list[Target],
        note: Note,
        *,
        shown: str,
        audit: tuple[str, dict[str, Any]],
    ) -> bool:
        if not targets:
            return False  # no configured channel to send it to: nothing to record either
        return await self.store.add_deliveries_once(
            item.id,
            kind=kind,
            targets=targets,
            note=NewEvent(note),
            now=self.ctx.clock(),
            shown=shown,
            audit=audit,
        )
