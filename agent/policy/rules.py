"""Which policy a tool call gets, from its arguments: the skill's rules, and the tool's hints.

A skill's `tools` entry may carry `rules` (`pizzabot.agent.skills.Rule`): conditions on argument
values, checked in order, the first that holds deciding `auto`, `notify`, `ask` or `deny`; when none
holds, the entry's `policy` applies, and a tool the skill does not list is asked about. This
module evaluates them (`judge`), and says which rule decided, so the card, the timeline and
the model can say so too.

Rules fail closed. The arguments were checked against the tool's input schema before any
rule reads them (`pizzabot.agent.settle`, `pizzabot.agent.request_checks`), and a value still holds, does not
hold, or *maybe* holds a condition (`pizzabot.agent.policy.conditions`). A maybe is a doubt that a
tool could resolve against the rule's intent: a type the rule does not compare (the tool
may read "5000" as 5000, "Prod" as prod), text equal but for case, Unicode form or
surrounding space, a value a `ne` or `not_in` cannot see (it is left out: the tool's default
may be the one excluded), a command line that cannot be read. So a maybe makes a `deny` rule
apply, an `ask` rule apply unless a rule after it denies, and an `auto` or `notify` rule
never (both run a call without asking): a rule
that only may hold decides when it is at least as strict as what the rules after it and the
policy decide (`judge`), and the ruling says the doubt. Per operator:

| operator | a value of the rule's type | another JSON type (`"5000"`, `true`) | text equal but for case, form, spaces | left out, or null |
| --- | --- | --- | --- | --- |
| `eq`, `in` | holds when equal | maybe | maybe | no |
| `ne`, `not_in` | holds when not equal | maybe | maybe | maybe |
| `lt`, `lte`, `gt`, `gte` | compared | maybe | — | no |
| `matches` | on the whole text | maybe | maybe | no |
| `runs` | read as a shell would (`pizzabot.agent.shell`) | maybe | maybe | no |
| `present: true` / `false` | yes / no (given but blank: maybe) | yes / no | — | no / yes |

Blank is `""`, spaces alone, `[]` or `{}`, which a tool may take for absent. `eq: null`
holds for null and maybe for a left-out argument; `1` and `1.0` are one number, and `true`
is not `1`. A condition about a value that is not there does not hold (a deny rule on
`customer.country` does not refuse a call that names no customer), except `ne`, `not_in` and
`present: false`, which err toward matching.

MCP tools may describe themselves (`readOnlyHint`, `destructiveHint`, ...): `ToolHints`.
They are the tool server's claims, so they are shown on cards as hints and change a policy
only where the skill opts in (`defaults: {read_only: auto}`), and only for a tool the skill
does not list: never over an explicit policy, a rule or a pattern such as "*".

Paths in rules are checked against the tools' JSON schemas once the MCP servers list them
(`check_paths`): a path into nothing the schema has is a mistake in the skill file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from pizzabot.agent.policy.conditions import Finding, holds, matches
from pizzabot.agent.shell import Truth, fold
from pizzabot.agent.skills import Policy, Problem, Skill, ToolRule

__all__ = [
    "Finding",
    "Ruling",
    "ToolHints",
    "Truth",
    "asking_rule",
    "check_paths",
    "fold",
    "holds",
    "judge",
    "matches",
]

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
    #: The rule's reason, and why it applied where it only may have (`doubt`).
    reason: str | None = None
    #: Why the rule may hold, where it applied without surely holding ("amount is the text
    #: '5000', and the rule compares numbers"); None where it surely held, or no rule decided.
    doubt: str | None = None

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
    `defaults.read_only` when its hints say harmless, else `ask`.

    A rule that only may hold (see the module's table) decides when it is at least as strict
    as what the rules after it and the policy decide, so a doubt never loosens a call: a
    `deny` applies, an `ask` applies unless a later rule denies, and an `auto` does not."""
    listed = skill.entry(tool)
    if listed is None:
        if skill.defaults.read_only is not None and hints is not None and hints.harmless:
            return Ruling(skill.defaults.read_only, tool, "hints")
        return Ruling("ask", tool, "default")
    key, entry = listed
    able: list[Ruling] = []
    for number, rule in enumerate(entry.rules, 1):
        found = matches(rule, args)
        # A maybe never lets a call run unasked: not an `auto` rule, nor a `notify` one.
        unasked = rule.policy in ("auto", "notify")
        if found.truth is Truth.NO or (found.truth is Truth.MAYBE and unasked):
            continue
        said = rule.reason
        if found.doubt is not None:
            said = f"{said} ({found.doubt})" if said else found.doubt
        able.append(Ruling(rule.policy, tool, "rule", key, number, said, found.doubt))
        if found.truth is Truth.YES:
            break
    else:
        able.append(Ruling(entry.policy, tool, "policy", key))
    return max(able, key=lambda r: _STRICTNESS[r.policy])  # the first, of equals


_STRICTNESS: dict[Policy, int] = {"auto": 0, "notify": 1, "ask": 2, "deny": 3}


# -- paths against the tools' schemas -------------------------------------------------------


def asking_rule(skill: Skill, tool: str | None, args: Mapping[str, Any] | None) -> int | None:
    """The rule (from 1) of `tool`'s entry that asks about a call with `args`, when one of
    that entry's rules has a ladder of its own (`ToolRule.asked_by`); None: the tool's ladder
    applies. Judged on the arguments as they stand (an edit's, after an edit)."""
    listed = skill.entry(tool) if tool else None
    if tool is None or listed is None or not any(r.has_ladder for r in listed[1].rules):
        return None
    ruling = judge(skill, tool, args or {})
    return ruling.number if ruling.source == "rule" and ruling.policy == "ask" else None


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
