"""What to do next with a tool call the model asked for, from the skill's rule and the log.

A pure function of the call's state (rebuilt from the event log) and the tool's rule, so the
engine's loop only carries out what it says. Three ways, as the policy says:

- `auto`: run it — unless a crash lost the result of a start: then it runs again only when
  the skill marks the tool idempotent, and otherwise the model is told the outcome is unknown;
- `ask`: a person is asked (once per item), and the engine waits for the decision;
- a decision (`apply_decision`): approve or edit runs the call with its final arguments,
  reject or expiry tells the model, and an approved call whose start lost its result is asked
  again, saying it may already have happened.

`deny` and a tool the servers do not offer tell the model so, and nothing runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_never

from agent.conversation import CallState
from agent.events import DecisionMade
from agent.model import Approve, Edit, Expired, Reject
from agent.skills import ToolRule

__all__ = [
    "INTERRUPTED_ASK",
    "INTERRUPTED_AUTO",
    "REASKED",
    "AskPerson",
    "AwaitDecision",
    "Execute",
    "Plan",
    "StopRun",
    "TellModel",
    "apply_decision",
    "plan",
]

INTERRUPTED_AUTO = (
    "this call was interrupted by a restart and its outcome is unknown; it was not repeated"
)
#: On a card asked again (and in the run's log): the first attempt may well have taken effect.
REASKED = (
    "the approved call started before a restart, and its result was lost. "
    "It may already have happened: check before approving again"
)
INTERRUPTED_ASK = (
    "the approved call started before a restart, and its result was lost: it may already "
    "have happened; asking again"
)


@dataclass(frozen=True)
class TellModel:
    """The call does not run; the model reads `text` as its (failed) result."""

    text: str
    rejected: bool = False
    expired: bool = False
    interrupted: bool = False


@dataclass(frozen=True)
class Execute:
    args: dict[str, Any]
    item_id: str | None = None  # the decided item, for an `ask` call


@dataclass(frozen=True)
class AskPerson:
    """Make an action item. `again`: the approved call started and a crash lost its result."""

    again: bool = False


@dataclass(frozen=True)
class AwaitDecision:
    """An item was made and nobody decided yet (or it was closed without a decision)."""

    item_id: str


@dataclass(frozen=True)
class StopRun:
    """Tell the model `text` (so a follow-up finds the conversation whole), then stop the run."""

    text: str


Plan = TellModel | Execute | AskPerson | AwaitDecision | StopRun


def plan(call: CallState, qualified: str, rule: ToolRule | None) -> Plan:
    """What happens to `call` (`rule` is None: no server offers that tool)."""
    if rule is None:
        return TellModel(f"there is no tool named {call.wire_name!r}")
    match rule.policy:
        case "deny":
            return TellModel(
                f"the tool {qualified} is not allowed by the policy of this skill; "
                "do not try to reach the same effect another way"
            )
        case "auto":
            if call.started and not rule.idempotent:
                return TellModel(INTERRUPTED_AUTO, interrupted=True)
            return Execute(call.args)
        case "ask":
            if call.decision is not None:
                return apply_decision(call, call.decision)
            if call.item_ids:
                return AwaitDecision(call.item_ids[-1])
            return AskPerson()
        case _:
            assert_never(rule.policy)


def apply_decision(call: CallState, decided: DecisionMade) -> Plan:
    match decided.decision:
        case Reject(reason=reason):
            return TellModel(
                f"A human ({decided.actor}) rejected this call. "
                f"Reason: {reason or 'no reason given'}. Do not retry it; adjust your plan.",
                rejected=True,
            )
        case Expired(reason=reason, halt=halt):
            why = reason or "no one answered in time"
            return StopRun(why) if halt else TellModel(why, expired=True)
        case Approve() | Edit():
            if call.started:
                return AskPerson(again=True)
            return Execute(call.final_args, decided.item_id)
        case _:
            assert_never(decided.decision)
