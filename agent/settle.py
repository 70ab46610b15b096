"""What to do next with a tool call the model asked for, from the skill's policy and the log.

A pure function of the call's state (rebuilt from the event log), the skill and the tool,
so the engine's loop only carries out what it says. The policy of the call comes from
`pizzabot.agent.policy.rules.judge` (the tool's rules on the call's arguments, its policy, its
hints), and each outcome carries which rule decided, for the log and the card. Three ways:

- `auto` (and `notify`, whose approvers are then told: `pizzabot.agent.notify`): run it — unless a crash lost the result of a start: then it runs again only when
  the skill marks the tool idempotent, and otherwise the model is told the outcome is unknown;
- `ask`: a person is asked (once per item), and the engine waits for the decision — unless
  a grant covers the call (`pizzabot.agent.policy.grants`): then it runs, naming the grant. A call
  that a grant let start and whose result a crash lost is asked about, not run again;
- a decision (`apply_decision`): approve or edit runs the call with its final arguments,
  reject or expiry tells the model, and an approved call whose start lost its result is asked
  again, saying it may already have happened.

Before any of this, the call's arguments are checked against the tool's input schema
(`pizzabot.agent.argforms.validate_arguments`, as an edit is): arguments that do not fit are never
run, asked about or judged by a rule (a rule reads values of the types the schema says), and
the model reads what is wrong as the call's result, to call it again.

`deny` and a tool the servers do not offer tell the model so, and nothing runs; so does an
edit whose arguments a rule denies (the inbox refuses such an edit; this holds even so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, assert_never

from pizzabot.agent.argforms import validate_arguments
from pizzabot.agent.conversation import CallState
from pizzabot.agent.events import DecisionMade
from pizzabot.agent.model import Approve, Edit, Expired, Reject, Risk
from pizzabot.agent.policy.call_verdict import Granted, call_verdict, card_risk
from pizzabot.agent.policy.grants import Grant
from pizzabot.agent.policy.rules import Ruling, judge
from pizzabot.agent.skills import Skill
from pizzabot.agent.tools import ToolSpec

__all__ = [
    "INTERRUPTED_ASK",
    "INTERRUPTED_AUTO",
    "REASKED",
    "AskPerson",
    "AwaitDecision",
    "Execute",
    "Granted",
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
    #: A `deny`: what denied it ("rule 2 of crm.refund", "the policy of crm.refund"), or
    #: "the input schema of crm.refund" for arguments that do not fit it.
    denied_by: str | None = None


@dataclass(frozen=True)
class Execute:
    args: dict[str, Any]
    item_id: str | None = None  # the decided item, for an `ask` call
    #: What let it run without asking, when a rule (or the tool's hints) did.
    rule: str | None = None
    #: The grant that let it run without asking, when one did.
    grant: Grant | None = None
    #: The grant the approval asked for ("run", "1h", "exact"): made before the call runs.
    grant_asked: str | None = None
    #: A `notify` call: what said so ("the policy of crm.add"); its approvers are told.
    notify: str | None = None


@dataclass(frozen=True)
class AskPerson:
    """Make an action item showing `risk`. `again`: the approved call started and a crash
    lost its result. `rule`: the rule that asked, when one did."""

    again: bool = False
    risk: Risk = field(default_factory=Risk)
    rule: str | None = None


@dataclass(frozen=True)
class AwaitDecision:
    """An item was made and nobody decided yet; `ask` makes a new one if it was closed
    without a decision."""

    item_id: str
    ask: AskPerson = field(default_factory=AskPerson)


@dataclass(frozen=True)
class StopRun:
    """Tell the model `text` (so a follow-up finds the conversation whole), then stop the run."""

    text: str


Plan = TellModel | Execute | AskPerson | AwaitDecision | StopRun


def plan(
    call: CallState, skill: Skill, tool: ToolSpec | None, granted: Granted | None = None
) -> Plan:
    """What happens to `call` under `skill`; `tool` is the tool it calls (None: no server
    offers it); `granted` the grants that may let an `ask` call run without asking."""
    if tool is None:
        return TellModel(f"there is no tool named {call.wire_name!r}")
    qualified = tool.qualified
    wrong = validate_arguments(tool.schema, call.args)
    if wrong:
        said = "; ".join(f"{name}: {why}" if name else why for name, why in wrong.items())
        return TellModel(
            f"the arguments do not fit the input schema of {call.wire_name}, so it did not "
            f"run: {said}. Call it again with arguments that fit",
            denied_by=f"the input schema of {qualified}",
        )
    verdict = call_verdict(skill, qualified, call.args, hints=tool.hints, granted=granted)
    ruling = verdict.ruling
    match ruling.policy:
        case "deny":
            return _denied(ruling)
        case "auto" | "notify":
            if call.started and not skill.rule(qualified).idempotent:
                return TellModel(INTERRUPTED_AUTO, interrupted=True)
            notify = ruling.why if ruling.policy == "notify" else None
            return Execute(call.args, rule=ruling.by_rule, notify=notify)
        case "ask":
            if call.decision is not None:
                return apply_decision(call, call.decision, skill=skill, tool=tool)
            if call.started:
                # A grant let it start, and a crash lost the result: a person looks.
                return _ask_again(skill, tool, call)
            if verdict.grant is not None and not call.item_ids:
                return Execute(call.args, grant=verdict.grant)
            ask = AskPerson(risk=verdict.risk, rule=ruling.by_rule)
            if call.item_ids:
                return AwaitDecision(call.item_ids[-1], ask)
            return ask
        case _:
            assert_never(ruling.policy)


def _denied(ruling: Ruling) -> TellModel:
    return TellModel(ruling.refusal(), denied_by=ruling.why)


def apply_decision(call: CallState, decided: DecisionMade, *, skill: Skill, tool: ToolSpec) -> Plan:
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
                return _ask_again(skill, tool, call)
            if isinstance(decided.decision, Edit):
                # The rules hold for the arguments that will actually run.
                ruling = judge(skill, tool.qualified, call.final_args, tool.hints)
                if ruling.policy == "deny":
                    return _denied(ruling)
            grant = decided.decision.grant if isinstance(decided.decision, Approve) else None
            return Execute(call.final_args, decided.item_id, grant_asked=grant)
        case _:
            assert_never(decided.decision)


def _ask_again(skill: Skill, tool: ToolSpec, call: CallState) -> AskPerson:
    """Ask again about an approved call whose start lost its result."""
    ruling = judge(skill, tool.qualified, call.args, tool.hints)
    risk = card_risk(skill, tool.qualified, ruling, hints=tool.hints)
    return AskPerson(again=True, risk=risk, rule=ruling.by_rule)
