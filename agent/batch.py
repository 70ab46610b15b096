"""Approve all: one answer for the calls the model asked for together, in one turn.

When one model reply asks for several `ask` calls, the engine puts them all on cards at once
(in one transaction) and calls the model again only once every call of that reply has a
result. So the cards of a turn are the run's pending tool items whose calls belong to its
latest model reply (`turn_items`): no stored turn id is needed, the event log says it.

`approve_all` still decides each call on its own, through `Inbox.decide`: each is checked,
recorded, audited and shown on every channel as if approved by hand, and the calls run in the
model's order. A call that needs more than one person's approval, or that this approver may
not decide, is left out, and the answer says which and why (`Batch.summary`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pizzabot.agent.errors import AlreadyDecided, Conflict, InvalidArguments, NotAllowed, NotFound
from pizzabot.agent.events import AssistantMessage, Event
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Approve, Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.store import ItemReader

__all__ = ["Batch", "Outcome", "TurnReader", "approve_all", "required_approvals", "turn_items"]

#: Why a call is left out, by cause; the channels show these words.
NEEDS_MORE = "needs {n} approvals: approve it on its own card"
NOT_YOURS = "you may not decide this call here"


@dataclass(frozen=True)
class Outcome:
    """One call of the batch: approved, or left out and why."""

    item: Item
    approved: bool
    why: str | None = None


@dataclass(frozen=True)
class Batch:
    run_id: str
    outcomes: tuple[Outcome, ...]

    @property
    def approved(self) -> list[Item]:
        return [o.item for o in self.outcomes if o.approved]

    @property
    def left_out(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.approved]

    def summary(self) -> str:
        """One plain sentence per part: what was approved, and each call left out and why."""
        if not self.outcomes:
            return "Nothing is waiting for a decision in this run."
        n = len(self.outcomes)
        done = self.approved
        lines = [
            f"Approved {len(done)} of {n}: {', '.join(_name(i) for i in done)}."
            if done
            else f"Approved none of {n}."
        ]
        lines += [f"Left out {_name(o.item)}: {o.why}." for o in self.left_out]
        return "\n".join(lines)


class TurnReader(ItemReader, Protocol):
    """What finding a turn's cards reads: the run's items, and its log (which calls one
    model reply made)."""

    async def events(self, run_id: str) -> list[Event]: ...


def _name(item: Item) -> str:
    return item.tool or item.title


def required_approvals(inbox: Inbox, item: Item) -> int:
    """How many people must approve `item`'s call (`approvals.required` of its tool, where the
    skill sets it); 1 when the skill is gone or says nothing."""
    skills = inbox.ctx.skills
    if item.tool is None or item.skill not in skills:
        return 1
    approvals = getattr(skills.get(item.skill).rule(item.tool), "approvals", None)
    required = getattr(approvals, "required", 1)
    return required if isinstance(required, int) else 1


async def turn_items(store: TurnReader, run_id: str) -> list[Item]:
    """The pending cards of the run's latest model turn, in the order the model asked."""
    pending = await store.list_items(box=Box.ACTION, status=ItemStatus.PENDING, run_id=run_id)
    tools = {i.call_id: i for i in pending if i.kind is ItemKind.TOOL and i.call_id}
    if not tools:
        return []
    order: Sequence[str] = ()
    for event in await store.events(run_id):
        if isinstance(event.payload, AssistantMessage) and event.payload.tool_calls:
            order = [c.id for c in event.payload.tool_calls]
    return [tools[c] for c in order if c in tools]


async def approve_all(inbox: Inbox, run_id: str, *, by: Principal) -> Batch:
    """Approve every call of the run's waiting turn that `by` may approve alone, one decision
    each; the rest are left out with the reason. A refused call is audited by `Inbox.decide`,
    as a refused single approval is."""
    outcomes: list[Outcome] = []
    for item in await turn_items(inbox.ctx.store, run_id):
        required = required_approvals(inbox, item)
        if required > 1:
            outcomes.append(Outcome(item, False, NEEDS_MORE.format(n=required)))
            continue
        try:
            decided = await inbox.decide(item.id, Approve(), by=by)
        except NotAllowed:
            outcomes.append(Outcome(item, False, NOT_YOURS))
        except AlreadyDecided as exc:
            who = exc.item.decided_by or "someone"
            outcomes.append(Outcome(exc.item, False, f"already {exc.item.status} by {who}"))
        except (InvalidArguments, NotFound, Conflict) as exc:
            outcomes.append(Outcome(item, False, str(exc)))
        else:
            outcomes.append(Outcome(decided, True))
    return Batch(run_id, tuple(outcomes))
