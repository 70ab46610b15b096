"""Which policy a tool call gets, from its arguments: the skill's rules, and the tool's hints.

A skill's `tools` entry may carry `rules` (`agent.skills.Rule`): conditions on argument
values, checked in order, the first that holds deciding `auto`, `ask` or `deny`; when none
holds, the entry's `policy` applies, and a tool the skill does not list is asked about. This
module evaluates them (`judge`), and says which rule decided, so the card, the timeline and
the model can say so too.

Rules fail closed on type: a number comparison holds only for a JSON number (an amount sent
as "100.0" or `true` does not match `lte: 100` and falls through to the next rule or the
policy), `matches` only for a string, and an argument that is not there matches nothing but
`present: false`.

MCP tools may describe themselves (`readOnlyHint`, `destructiveHint`, ...): `ToolHints`.
They are the tool server's claims, so they are shown on cards as hints and change a policy
only where the skill opts in (`defaults: {read_only: auto}`), and only for a tool the skill
does not list: never over an explicit policy, a rule or a pattern such as "*".

Paths in rules are checked against the tools' JSON schemas once the MCP servers list them
(`check_paths`): a path into nothing the schema has is a mistake in the skill file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from agent.skills import Check, Policy, Problem, Rule, Skill, ToolRule

__all__ = [
    "Ruling",
    "ToolHints",
    "check_paths",
    "holds",
    "judge",
    "matches",
]

_MISSING = object()

#: How a ruling came about: a rule of the tool's entry, the entry's policy, the hints with
#: the skill's `defaults.read_only`, or the default for a tool the skill does not list.
Source = Literal["rule", "policy", "hints", "default"]


@dataclass(frozen=True)
class ToolHints:
    """An MCP tool's annotations (`readOnlyHint`, ...); None where the server says nothing."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @classmethod
    def of(cls, annotations: Any) -> ToolHints | None:
        """From an MCP `ToolAnnotations` (None when the tool has none, or sets no hint)."""
        if annotations is None:
            return None

        def flag(name: str) -> bool | None:
            value = getattr(annotations, name, None)
            return value if isinstance(value, bool) else None

        hints = cls(
            read_only=flag("read_only_hint"),
            destructive=flag("destructive_hint"),
            idempotent=flag("idempotent_hint"),
            open_world=flag("open_world_hint"),
        )
        return hints if hints != cls() else None

    @property
    def harmless(self) -> bool:
        """Read-only and not destructive, by the server's word (MCP's `destructiveHint`
        defaults to true, but means something only for a tool that is not read-only)."""
        return self.read_only is True and self.destructive is not True

    def words(self) -> tuple[str, ...]:
        """The hints as a card shows them."""
        out: list[str] = []
        if self.read_only is True:
            out.append("read-only")
        elif self.read_only is False:
            out.append("changes things")
        if self.destructive is True:
            out.append("destructive")
        elif self.destructive is False and self.read_only is not True:
            out.append("not destructive")
        if self.idempotent is True:
            out.append("idempotent")
        if self.open_world is True:
            out.append("reaches outside systems")
        elif self.open_world is False:
            out.append("stays inside its own system")
        return tuple(out)


@dataclass(frozen=True)
class Ruling:
    """The policy of one call and why: `number` is the rule (from 1) of the `entry` (the
    `tools` key: a name or a pattern) that decided, when a rule did."""

    policy: Policy
    tool: str
    source: Source
    entry: str | None = None
    number: int | None = None
    reason: str | None = None

    @property
    def why(self) -> str:
        """ "rule 1 of crm.refund", "the policy of crm.refund", ..."""
        match self.source:
            case "rule":
                return f"rule {self.number} of {self.entry}"
            case "policy":
                return f"the policy of {self.entry}"
            case "hints":
                return "a read-only tool (defaults.read_only)"
            case "default":
                return "a tool this skill does not list"
            case _:
                assert_never(self.source)

    @property
    def by_rule(self) -> str | None:
        """What the run's log records: the rule (or the hints) that decided, when one did;
        None when the tool's plain policy or the default did, as before rules existed."""
        return self.why if self.source in ("rule", "hints") else None

    def __str__(self) -> str:
        return f"{self.policy}: {self.why}"

    def refusal(self) -> str:
        """What the model reads for a `deny`."""
        if self.source == "rule":
            said = f": {self.reason}" if self.reason else ""
            return (
                f"this call of {self.tool} is not allowed by {self.why}{said}. "
                "Do not try to reach the same effect another way"
            )
        return (
            f"the tool {self.tool} is not allowed by the policy of this skill; "
            "do not try to reach the same effect another way"
        )


def judge(
    skill: Skill, tool: str, args: Mapping[str, Any], hints: ToolHints | None = None
) -> Ruling:
    """The policy for calling `tool` ("server.tool") with `args` under `skill`: the first of
    its entry's rules that holds, else the entry's policy; for a tool the skill does not list,
    `defaults.read_only` when its hints say harmless, else `ask`."""
    listed = skill.entry(tool)
    if listed is None:
        if skill.defaults.read_only is not None and hints is not None and hints.harmless:
            return Ruling(skill.defaults.read_only, tool, "hints")
        return Ruling("ask", tool, "default")
    key, entry = listed
    for number, rule in enumerate(entry.rules, 1):
        if matches(rule, args):
            return Ruling(rule.policy, tool, "rule", key, number, rule.reason)
    return Ruling(entry.policy, tool, "policy", key)


def matches(rule: Rule, args: Mapping[str, Any]) -> bool:
    """Every condition of the rule's `when` holds for `args`."""
    return all(holds(check, _at(args, path)) for path, check in rule.when.items())


def holds(check: Check, value: Any) -> bool:
    """Every operator of `check` holds for `value` (`_MISSING`: the argument is not there)."""
    return all(_holds(op, operand, value) for op, operand in check.operators().items())


def _holds(op: str, operand: Any, value: Any) -> bool:
    if op == "present":
        return (value is not _MISSING and value is not None) is operand
    if value is _MISSING:
        return False
    match op:
        case "eq":
            return _same(value, operand)
        case "ne":
            return not _same(value, operand)
        case "in":
            return any(_same(value, v) for v in operand)
        case "not_in":
            return not any(_same(value, v) for v in operand)
        case "matches":
            return isinstance(value, str) and re.fullmatch(operand, value) is not None
        case "lt" | "lte" | "gt" | "gte":
            if not _number(value):
                return False
            # Python compares an int with a float exactly, however large the int.
            return bool(
                {
                    "lt": value < operand,
                    "lte": value <= operand,
                    "gt": value > operand,
                    "gte": value >= operand,
                }[op]
            )
    raise ValueError(f"unknown operator {op!r}")  # the skill's schema admits no other


def _number(value: Any) -> bool:
    """A finite JSON number: not a string that looks like one, and not a bool (an int in
    Python)."""
    if isinstance(value, bool):
        return False
    # An int is always finite (and may be too large for a float: isfinite would raise).
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 are the same number, but true is not 1 and "1" is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if _number(a) or _number(b):
        return _number(a) and _number(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _at(args: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path ("customer.country"; a number steps into a list)."""
    value: Any = args
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


# -- paths against the tools' schemas -------------------------------------------------------


def check_paths(skill: Skill, schemas: Mapping[str, Mapping[str, Any]]) -> list[Problem]:
    """Problems with rules whose argument paths lead into nothing the tool's JSON schema has.

    `schemas` are the listed tools' input schemas by "server.tool". An entry is checked
    against the tools it decides for (for a pattern: the listed tools it covers, where no
    exact entry does); a path is wrong when none of them has it.
    """
    covered: dict[str, list[Mapping[str, Any]]] = {}
    for tool, schema in schemas.items():
        listed = skill.entry(tool)
        if listed is not None:
            covered.setdefault(listed[0], []).append(schema)
    lines = skill.origin.lines if skill.origin is not None else {}
    problems: list[Problem] = []
    for key, entry in skill.tools.items():
        if not isinstance(entry, ToolRule) or key not in covered:
            continue
        for number, rule in enumerate(entry.rules, 1):
            for path in rule.when:
                if not any(_has_path(s, s, path.split(".")) for s in covered[key]):
                    problems.append(
                        Problem(
                            lines.get((key, number, path)),
                            f"tools.{key}.rules.{number - 1}.when: {path!r} is not an argument "
                            f"of {key} (its schema has {_top_names(covered[key])})",
                        )
                    )
    return problems


def _top_names(schemas: list[Mapping[str, Any]]) -> str:
    names = sorted({n for s in schemas for n in s.get("properties") or {}})
    return ", ".join(names) if names else "no named arguments"


def _has_path(root: Mapping[str, Any], schema: Any, parts: list[str], depth: int = 0) -> bool:
    """Whether `parts` can lead somewhere in `schema`; unknown shapes give the benefit of the
    doubt (only a closed list of properties that lacks the name says no)."""
    if not parts:
        return True
    if not isinstance(schema, Mapping) or depth > 32:
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        return True if target is None else _has_path(root, target, parts, depth + 1)
    branches = [b for k in ("anyOf", "oneOf", "allOf") for b in schema.get(k) or []]
    if branches:
        return any(_has_path(root, b, parts, depth + 1) for b in branches)
    head, rest = parts[0], parts[1:]
    props = schema.get("properties")
    if isinstance(props, Mapping) and head in props:
        return _has_path(root, props[head], rest, depth + 1)
    if head.isdigit() and ("items" in schema or "prefixItems" in schema):
        prefix = schema.get("prefixItems") or []
        item = prefix[int(head)] if int(head) < len(prefix) else schema.get("items")
        return _has_path(root, item, rest, depth + 1)
    if schema.get("patternProperties"):
        return True
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return _has_path(root, extra, rest, depth + 1)
    if extra is True:
        return True
    # Properties named and this one not among them: the path leads nowhere. A schema that
    # names none (any value, or an open mapping) cannot say.
    return not isinstance(props, Mapping) and schema.get("type") not in (
        "string",
        "number",
        "integer",
        "boolean",
        "null",
    )


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    """A local JSON pointer ("#/$defs/Customer"); None for anything else."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node
