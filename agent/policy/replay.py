"""A proposed set of skills, tried on the calls already made: which calls it would treat
differently, and whether any of that widens access (`pizzabot policy test`).

Each recorded call (`recorded_calls`, from a run's event log) is judged again by the one
verdict (`pizzabot.agent.policy.call_verdict`) under the proposed skill of the same name, and
compared with what happened then:

| then → now | change | widens |
| --- | --- | --- |
| asked → auto | `asked → auto` | yes |
| denied → auto or asked | `denied → allowed` | yes |
| asked by n people → by fewer | `fewer approvals` | yes |
| auto → asked | `auto → asked` | no |
| auto or asked → denied | `→ denied` | no |
| asked by n people → by more | `more approvals` | no |

A call a grant let run was asked by the policy (the grant stood in for a person): it counts
as asked, and grants are not replayed (they are the people's, not the skill file's). A call
whose tool no server offered, or whose arguments did not fit the tool's schema, never reached
the policy and is not replayed; nor is a question (`ask_human`), which is always asked.

A tool's hints (MCP annotations) are not recorded with its calls: a call that ran by its
read-only hints is replayed as read-only, every other call with no hints, so a new
`defaults.read_only` shows only on calls that ran by their hints before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from pizzabot.agent.events import (
    AssistantMessage,
    DecisionMade,
    Event,
    ToolRequest,
    ToolResult,
    ToolStarted,
)
from pizzabot.agent.model import REQUEST_CALL, Approve, Reject
from pizzabot.agent.policy.call_verdict import call_verdict
from pizzabot.agent.policy.rules import Ruling, ToolHints
from pizzabot.agent.skills import Policy, Skill

__all__ = ["Change", "RecordedCall", "Replay", "recorded_calls", "replay"]

ChangeKind = Literal[
    "asked → auto",
    "denied → allowed",
    "fewer approvals",
    "auto → asked",
    "→ denied",
    "more approvals",
]
WIDENING: frozenset[str] = frozenset({"asked → auto", "denied → allowed", "fewer approvals"})

_BY_HINTS = Ruling("auto", "", "hints").why
_SCHEMA = "the input schema of "


@dataclass(frozen=True)
class RecordedCall:
    """One call as it was settled: `then` is the policy's answer (a call a grant covered was
    asked), `approvals` how many people it needed, `harmless` that it ran by its hints."""

    run_id: str
    call_id: str
    skill: str
    tool: str
    args: dict[str, Any]
    at: datetime
    then: Policy
    approvals: int = 1
    granted: bool = False
    harmless: bool = False
    request: bool = False


@dataclass(frozen=True)
class Change:
    """Calls of one tool that the proposed skills would treat differently, in one way."""

    skill: str
    tool: str
    kind: ChangeKind
    then: str
    now: str
    #: What decides now ("rule 1 of crm.refund", "the policy of crm.refund", …).
    why: str
    calls: int
    example: dict[str, Any]
    runs: tuple[str, ...]

    @property
    def widens(self) -> bool:
        return self.kind in WIDENING


@dataclass
class Replay:
    """The outcome of a replay: the calls tried, the changes, the calls of skills the
    proposed set does not have (by skill)."""

    calls: int = 0
    changes: list[Change] = field(default_factory=list)
    missing: Counter[str] = field(default_factory=Counter)

    @property
    def widens(self) -> bool:
        return any(c.widens for c in self.changes)


def recorded_calls(
    run_id: str, skill: str, events: Sequence[Event], approvals: Mapping[str, int]
) -> list[RecordedCall]:
    """The calls of one run that reached the policy, from its event log; `approvals` are the
    people each asked call's item needed (by item id)."""
    proposed: dict[str, tuple[dict[str, Any], datetime]] = {}
    settled: dict[str, RecordedCall] = {}
    for e in events:
        p = e.payload
        if isinstance(p, AssistantMessage):
            for c in p.tool_calls:
                proposed.setdefault(c.id, (dict(c.arguments), e.at))
        elif isinstance(p, DecisionMade) and p.channel in ("policy", "grant"):
            _settled_on_arrival(settled, p)
        elif isinstance(p, ToolRequest | ToolStarted | ToolResult) and p.call_id not in settled:
            args, at = proposed.get(p.call_id, ({}, e.at))
            base = RecordedCall(run_id, p.call_id, skill, "", args, at, "ask")
            call = _settled(base, p, approvals)
            if call is not None:
                settled[p.call_id] = call
    return list(settled.values())


def _settled(
    base: RecordedCall, p: ToolRequest | ToolStarted | ToolResult, approvals: Mapping[str, int]
) -> RecordedCall | None:
    """How the call was settled, from its first event after the model proposed it; None for
    a call the rules never judged (a question, which is always asked; no such tool; arguments
    that did not fit the tool's schema)."""
    if "." not in p.tool:
        return None  # every tool is "server.tool": this is a question (`ask_human`)
    if isinstance(p, ToolRequest):
        request = p.call_id == REQUEST_CALL
        args = dict(p.args) if request or not base.args else base.args
        need = approvals.get(p.item_id, 1)
        return replace(base, tool=p.tool, args=args, approvals=need, request=request)
    if isinstance(p, ToolStarted):
        if p.grant is not None:
            return replace(base, tool=p.tool, granted=True)
        return replace(base, tool=p.tool, then="auto", harmless=p.rule == _BY_HINTS)
    if p.denied_by is None or p.denied_by.startswith(_SCHEMA):
        return None  # no tool, a schema refusal, or a result after a person's decision
    return replace(base, tool=p.tool, then="deny")


def _settled_on_arrival(settled: dict[str, RecordedCall], p: DecisionMade) -> None:
    """A request the rules (or a grant) decided as it came in: its item was never a card."""
    call = settled.get(p.call_id or "")
    if call is None or not call.request:
        return
    match p.decision:
        case Approve(grant=None) if p.channel == "policy":
            settled[call.call_id] = replace(call, then="auto")
        case Approve():
            settled[call.call_id] = replace(call, granted=True)
        case Reject():
            settled[call.call_id] = replace(call, then="deny")
        case _:
            pass


def _kind(then: Policy, now: Policy, before: int, after: int) -> ChangeKind | None:
    if then == now:
        if now != "ask" or before == after:
            return None
        return "fewer approvals" if after < before else "more approvals"
    if now == "deny":
        return "→ denied"
    if then == "deny":
        return "denied → allowed"
    return "asked → auto" if now == "auto" else "auto → asked"


def _said(policy: Policy, approvals: int, granted: bool = False) -> str:
    word = {"auto": "auto", "ask": "asked", "deny": "denied"}[policy]
    if policy == "ask" and approvals > 1:
        word = f"asked ({approvals} people)"
    return f"{word} (a grant covered it)" if granted else word


def replay(calls: Iterable[RecordedCall], skills: Mapping[str, Skill]) -> Replay:
    """What the proposed `skills` would do with `calls`, grouped by tool, change and the rule
    that decides now."""
    out = Replay()
    found: dict[tuple[str, str, ChangeKind, str, str, str], list[RecordedCall]] = {}
    for call in calls:
        skill = skills.get(call.skill)
        if skill is None:
            out.missing[call.skill] += 1
            continue
        out.calls += 1
        hints = ToolHints(read_only=True) if call.harmless else None
        verdict = call_verdict(skill, call.tool, call.args, hints=hints, one_call=call.request)
        now = verdict.ruling.policy
        after = verdict.risk.approvals_required or 1
        kind = _kind(call.then, now, call.approvals, after)
        if kind is None:
            continue
        then = _said(call.then, call.approvals, call.granted)
        key = (call.skill, call.tool, kind, then, _said(now, after), verdict.ruling.why)
        found.setdefault(key, []).append(call)
    for (skill_name, tool, kind, then, now_, why), group in sorted(found.items()):
        runs = tuple(dict.fromkeys(c.run_id for c in group))
        out.changes.append(
            Change(skill_name, tool, kind, then, now_, why, len(group), group[0].args, runs)
        )
    return out
