"""The calls people approve unchanged every time, and the skill-file change that would stop
asking about them: the part of `pizzabot.agent.stats` that writes rules.

Two kinds, the wider first:

- every decision on a tool approved it unchanged: the tool's `policy: auto`;
- every decision on a tool with the same arguments approved it unchanged (where the tool's
  other calls were not): a rule matching those arguments (`when: {path: {eq: value}}`, its
  nested objects by dotted path), first in the tool's `rules`. Where an argument's name cannot
  be written as a rule's path, the snippet offers an `exact` grant instead (`grants:
  [exact]`: the card's "approve, and don't ask again for these arguments").

A rule on the arguments it saw says nothing of arguments those calls did not have: the
snippet says so. A suggestion is a place to start; the person deciding reads it first.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from pizzabot.agent.model import Item, ItemStatus
from pizzabot.agent.policy.grants import fingerprint

__all__ = ["Repeat", "repeats", "rule_snippet"]

_NAME = re.compile(r"^[^.\s]+$")


class Repeat(BaseModel):
    """A tool, or a tool's call with these `args`, approved unchanged `approved` times out of
    `approved` decisions by people, and the snippet for the skill's file that stops asking."""

    skill: str
    tool: str
    kind: Literal["policy", "rule", "grant"]
    approved: int
    args: dict[str, Any] | None = None
    snippet: str


def repeats(decided: Iterable[Item], min_repeats: int) -> list[Repeat]:
    """The repeats among tool cards `decided` by people, most approvals first."""
    tools: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for i in decided:
        if i.tool is not None:
            tools[(i.skill, i.tool)].append(i)
    out: list[Repeat] = []
    for (skill, tool), items in tools.items():
        if len(items) >= min_repeats and all(_unchanged(i) for i in items):
            snippet = _dump({"tools": {tool: {"policy": "auto"}}})
            out.append(
                Repeat(skill=skill, tool=tool, kind="policy", approved=len(items), snippet=snippet)
            )
            continue
        out.extend(_same_args(skill, tool, items, min_repeats))
    return sorted(out, key=lambda r: (-r.approved, r.skill, r.tool, fingerprint(r.args or {})))


def _unchanged(item: Item) -> bool:
    return item.status is ItemStatus.APPROVED


def _same_args(skill: str, tool: str, items: list[Item], min_repeats: int) -> list[Repeat]:
    calls: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        calls[fingerprint(i.args or {})].append(i)
    out: list[Repeat] = []
    for same in calls.values():
        if len(same) < min_repeats or not all(_unchanged(i) for i in same):
            continue
        args = dict(same[0].args or {})
        when = _when(args)
        if when:
            kind: Literal["rule", "grant"] = "rule"
            snippet = rule_snippet(tool, when, len(same))
        else:
            kind = "grant"
            snippet = _grant_snippet(tool)
        out.append(
            Repeat(
                skill=skill, tool=tool, kind=kind, approved=len(same), args=args, snippet=snippet
            )
        )
    return out


def _when(args: Mapping[str, Any], prefix: str = "") -> dict[str, Any] | None:
    """A rule's conditions that hold for exactly these argument values (nested objects by
    dotted path); None where a name cannot be a path, or there is nothing to match."""
    when: dict[str, Any] = {}
    for name, value in args.items():
        if not _NAME.match(name):
            return None
        path = f"{prefix}{name}"
        if isinstance(value, dict) and value:
            inner = _when(value, f"{path}.")
            if inner is None:
                return None
            when.update(inner)
        else:
            when[path] = {"eq": value}
    return when or None


def rule_snippet(tool: str, when: dict[str, Any], approved: int) -> str:
    """The tool's entry with one rule that runs calls with these values unasked."""
    entry = {"rules": [{"when": when, "policy": "auto"}]}
    return (
        f"# approved unchanged {approved} of {approved} times; put the rule first in the\n"
        "# tool's rules (first match wins). It checks only the arguments shown here.\n"
        + _dump({"tools": {tool: entry}})
    )


def _grant_snippet(tool: str) -> str:
    return (
        "# these arguments cannot be named in a rule: offer a grant for them on the card\n"
        + _dump({"tools": {tool: {"grants": ["exact"]}}})
    )


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
