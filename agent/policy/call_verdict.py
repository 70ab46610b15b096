"""The one verdict on a tool call before anyone decides it: auto, deny, a grant that covers
it, or a person asked, with the card they would see.

The engine's own calls (`pizzabot.agent.settle`) and requests from agents Pizza Bot does not
run (`pizzabot.agent.requests`) both ask `call_verdict`, so a rule, a grant, a tool's hints
and the risk notes count the same wherever a call comes from. What differs is only what the
caller knows, and it says so:

- `hints`: the MCP server's annotations of the tool. A request has none: an agent's word
  about its own call is not a tool server's, and hints may loosen a policy
  (`defaults.read_only`).
- `claimed`: risk notes the caller sends with the call (a request may), shown where the
  skill gives none, like hints: the skill author's notes always win.
- `one_call`: the run has no call after this one (a request's run), so a grant that lasts
  the run is not offered: it could never cover anything.
- `granted`: the grants that may cover the call (`Grants.for_call`), looked up by the caller
  only when the rules ask, since that is a query.

A call whose approval needs a passkey (`pizzabot.agent.step_up`) says so on its card
(`Risk.step_up`), and no grant is offered for it or covers it: a grant would skip the passkey
next time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pizzabot.agent.escalation import plan_text
from pizzabot.agent.model import Risk
from pizzabot.agent.policy.grants import Grant, covering, offered, scope_of
from pizzabot.agent.policy.rules import Ruling, ToolHints, judge
from pizzabot.agent.skills import Skill
from pizzabot.agent.step_up import step_up_for

__all__ = ["CallVerdict", "Granted", "call_verdict", "card_risk"]


@dataclass(frozen=True)
class Granted:
    """The grants that may cover a call (`Grants.for_call`), for its run, at the time."""

    grants: Sequence[Grant]
    run_id: str
    now: datetime


@dataclass(frozen=True)
class CallVerdict:
    """What the rules say of a call (`ruling`), the grant that lets an `ask` call run
    unasked (`grant`), and the card a person is shown when asked (`risk`)."""

    ruling: Ruling
    risk: Risk
    grant: Grant | None = None

    @property
    def outcome(self) -> Literal["deny", "auto", "notify", "granted", "ask"]:
        if self.ruling.policy == "ask" and self.grant is not None:
            return "granted"
        return self.ruling.policy


def call_verdict(
    skill: Skill,
    tool: str,
    args: Mapping[str, Any],
    *,
    hints: ToolHints | None = None,
    claimed: Risk | None = None,
    one_call: bool = False,
    granted: Granted | None = None,
) -> CallVerdict:
    """The verdict on calling `tool` ("server.tool") with `args` under `skill` (arguments
    already checked against the tool's schema)."""
    ruling = judge(skill, tool, args, hints)
    risk = card_risk(skill, tool, ruling, hints=hints, claimed=claimed, one_call=one_call)
    grant = None
    if ruling.policy == "ask" and granted is not None and risk.step_up is None:
        grant = covering(
            granted.grants,
            skill=skill,
            tool=tool,
            run_id=granted.run_id,
            args=args,
            now=granted.now,
        )
    return CallVerdict(ruling, risk, grant)


def card_risk(
    skill: Skill,
    tool: str,
    ruling: Ruling,
    *,
    hints: ToolHints | None = None,
    claimed: Risk | None = None,
    one_call: bool = False,
) -> Risk:
    """What the card says of the call: the skill's risk notes, else what the caller claims
    (the tool's hints, a request's notes); the rule that asked; the grants offered; how many
    people must approve, where more than one; whether a passkey must confirm an approval
    (then no grant is offered); the ladder, the asking rule's where it has its own."""
    notes = skill.rule(tool).risk
    if not notes.noted and claimed is not None and claimed.noted:
        notes = claimed
    shown_hints = hints.words() if hints is not None and not notes.noted else ()
    rule = ruling.by_rule
    if rule is not None and ruling.reason:
        rule = f"{rule}: {ruling.reason}"
    step_up = step_up_for(skill, tool, ruling, notes)
    grants = () if step_up else offered(skill, tool)
    if one_call:
        grants = tuple(c for c in grants if scope_of(c) != "run")
    required = skill.approvals_required(tool)
    asked = ruling.number if ruling.source == "rule" else None
    return Risk(
        impact=notes.impact,
        reversible=notes.reversible,
        scope=notes.scope,
        hints=shown_hints,
        rule=rule,
        grants=grants,
        approvals_required=required if required > 1 else None,
        step_up=step_up,
        ladder=plan_text(skill.rule(tool).asked_by(asked)),
    )
