"""Approve all: one answer for the calls the model asked for together, in one turn.

When one model reply asks for several `ask` calls, the engine puts them all on cards at once
(in one transaction) and calls the model again only once every call of that reply has a
result. So the cards of a turn are the run's pending tool items whose calls belong to its
latest model reply (`turn_items`): no stored turn id is needed, the event log says it.

`approve_all` still decides each call on its own, through `Inbox.decide`: each is checked,
recorded, audited and shown on every channel as if approved by hand, and the calls run in the
model's order. A call that needs more than one person's approval, or that this approver may
not decide, is left out, and the answer says which and why (`Batch.summary`).

An approval counts only for the calls as the approver saw them (`pizzabot.agent.card_digest`).
The batch card sends `seen`: each shown call's digest ({item id: digest}, the web form and the
API), or one digest of the lot (`batch_digest`, Slack, whose button value is short). A call whose
digest is not its card's now, or that the card did not show, is left out ("this card changed"),
and nothing of it is approved; with one batch digest that does not match, no call can be told
apart from the others, so every call is left out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pizzabot.agent.card_digest import DIGEST_CHARS, card_digest, seen_matches
from pizzabot.agent.errors import (
    AlreadyDecided,
    CardChanged,
    Conflict,
    InvalidArguments,
    NotAllowed,
    NotFound,
)
from pizzabot.agent.events import AssistantMessage, Event
from pizzabot.agent.inbox import Inbox
from pizzabot.agent.model import Approve, Box, Item, ItemKind, ItemStatus
from pizzabot.agent.policy.principal import Principal
from pizzabot.agent.policy.quorum import required_for
from pizzabot.agent.store import ItemReader

__all__ = [
    "Batch",
    "Outcome",
    "Seen",
    "TurnReader",
    "approve_all",
    "batch_digest",
    "required_approvals",
    "turn_items",
]

#: Why a call is left out, by cause; the channels show these words.
NEEDS_MORE = "needs {n} approvals: approve it on its own card"
NOT_YOURS = "you may not decide this call here"
NOT_SHOWN = "this card changed: it did not show this call; look at it and decide again"

#: What the batch card showed: each call's digest by item id, or one digest of them all
#: (`batch_digest`); None where the way in carries none (the store's version check binds).
Seen = Mapping[str, str] | str | None


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
    """How many people must approve `item`'s call: what its card asked, or more where its
    skill now asks more (`pizzabot.agent.policy.quorum.required_for`, as `Inbox.decide` counts)."""
    skills = inbox.ctx.skills
    return required_for(item, skills.get(item.skill) if item.skill in skills else None)


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


def batch_digest(items: Sequence[Item]) -> str:
    """One digest of the cards of `items` as they are now: what a card too small for every
    call's digest (a Slack button's value) carries for the lot."""
    lines = sorted(f"{item.id}:{card_digest(item)}" for item in items)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:DIGEST_CHARS]


def _seen_each(items: Sequence[Item], seen: Seen) -> dict[str, str | None]:
    """The digest each call is decided with: the one its card showed, or "" for a call the
    card did not show (never a card's digest, so refused as changed)."""
    if seen is None:
        return {item.id: None for item in items}
    if isinstance(seen, str):
        whole = seen.strip().lower() == batch_digest(items)
        # Matched: each is bound to its digest as read here (a change since is refused);
        # else none can be told apart from the others, and each is refused.
        return {item.id: card_digest(item) if whole else "" for item in items}
    return {item.id: seen.get(item.id, "") for item in items}


async def approve_all(inbox: Inbox, run_id: str, *, by: Principal, seen: Seen = None) -> Batch:
    """Approve every call of the run's waiting turn that `by` may approve alone, one decision
    each, each as the batch card showed it (`seen`); the rest are left out with the reason.
    A refused call is audited by `Inbox.decide`, as a refused single approval is."""
    items = await turn_items(inbox.ctx.store, run_id)
    digests = _seen_each(items, seen)
    outcomes: list[Outcome] = []
    for item in items:
        required = required_approvals(inbox, item)
        # A changed card is refused as such by `decide` (audited, shown again), whatever else.
        if required > 1 and seen_matches(item, digests[item.id]):
            outcomes.append(Outcome(item, False, NEEDS_MORE.format(n=required)))
            continue
        try:
            decided = await inbox.decide(item.id, Approve(), by=by, seen=digests[item.id])
        except NotAllowed:
            outcomes.append(Outcome(item, False, NOT_YOURS))
        except AlreadyDecided as exc:
            who = exc.item.decided_by or "someone"
            outcomes.append(Outcome(exc.item, False, f"already {exc.item.status} by {who}"))
        except CardChanged as exc:
            why = NOT_SHOWN if isinstance(seen, Mapping) and item.id not in seen else str(exc)
            outcomes.append(Outcome(exc.item, False, why))
        except (InvalidArguments, NotFound, Conflict) as exc:
            outcomes.append(Outcome(item, False, str(exc)))
        else:
            outcomes.append(Outcome(decided, True))
    return Batch(run_id, tuple(outcomes))
