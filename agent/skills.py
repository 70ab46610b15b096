"""Skills: what a user writes in YAML to describe one kind of background work.

A skill names the model, the MCP servers, the policy per tool, who may approve, where the
inbox goes and the budgets. Loading is strict: a bad file is refused with the file, the line
and what is wrong, and the other skills still load.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.errors import SkillError
from agent.model import Risk

Policy = Literal["auto", "ask", "deny"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(value: str | float | int) -> float:
    """Seconds in "90", "30s", "15m", "2h" or "1d"."""
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a duration like 30s, 15m, 2h or 1d")
    return float(match.group(1)) * _UNIT[match.group(2)]


Duration = Annotated[float, Field(ge=0)]

#: The grants a tool offers when its entry does not say (`grants:`).
DEFAULT_GRANTS = ("run", "1h", "exact")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StdioServer(_Strict):
    """A server Pizza Bot starts as a child process. It runs with a minimal environment:
    `PATH`, `HOME` and `LANG` from the server's, the variables named in `pass_env`, and what
    `env` sets; all of the server's environment (its secrets included) only with
    `inherit_env: true`."""

    command: str
    args: list[str] = []
    env: dict[str, str] = {}
    pass_env: list[str] = []
    inherit_env: bool = False
    cwd: str | None = None

    @field_validator("env", "pass_env")
    @classmethod
    def _env_names(cls, v: Any) -> Any:
        for name in v:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return v


class HttpServer(_Strict):
    url: str
    headers: dict[str, str] = {}


#: The operators of a rule's condition (`Check`), in the order the docs list them.
OPERATORS = ("eq", "ne", "lt", "lte", "gt", "gte", "in", "not_in", "matches", "present")
_NUMERIC = frozenset({"lt", "lte", "gt", "gte"})
_PATH = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")


def _is_number(value: Any) -> bool:
    """A JSON number: Python's bool is an int, and is not one."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_operand(value: Any, where: str) -> Any:
    """A value an argument can be compared with: what JSON holds (YAML also makes dates)."""
    if value is None or isinstance(value, str | bool) or _is_number(value):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: {value} is not a number an argument can have")
        return value
    if isinstance(value, list):
        return [_json_operand(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_operand(v, where) for k, v in value.items()}
    raise ValueError(
        f"{where}: {value} is a {type(value).__name__} in YAML, which no argument can be; "
        "quote it to compare with a string"
    )


def _bare_eq(value: Any) -> Any:
    """A bare value means `eq`; a mapping is operators, and only operators."""
    if not isinstance(value, dict):
        return {"eq": value}
    unknown = [str(k) for k in value if k not in OPERATORS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], OPERATORS, n=1)
        hint = f": did you mean `{close[0]}`?" if close else ""
        raise ValueError(
            f"unknown operator `{unknown[0]}`{hint} (operators: {', '.join(OPERATORS)}; "
            "a nested argument is named by its dotted path, like customer.country)"
        )
    if not value:
        raise ValueError(f"no operator: use one of {', '.join(OPERATORS)}")
    return value


class Check(_Strict):
    """What one argument must be for a rule to match; every operator given must hold.

    Comparisons are exact about JSON types, so a rule fails closed: `lt`/`lte`/`gt`/`gte`
    match only a number (not "100" nor true), `matches` only a string, and an argument that
    is not there matches nothing but `present: false`."""

    eq: Any = None
    ne: Any = None
    lt: float | None = None
    lte: float | None = None
    gt: float | None = None
    gte: float | None = None
    in_: list[Any] | None = Field(default=None, alias="in")
    not_in: list[Any] | None = None
    matches: str | None = None
    present: bool | None = Field(default=None, strict=True)

    @field_validator("lt", "lte", "gt", "gte", mode="before")
    @classmethod
    def _number(cls, v: Any, info: Any) -> Any:
        if not _is_number(v) or (isinstance(v, float) and not math.isfinite(v)):
            raise ValueError(f"{info.field_name} compares numbers, and {v!r} is not one")
        return v

    @field_validator("eq", "ne", mode="before")
    @classmethod
    def _value(cls, v: Any, info: Any) -> Any:
        return _json_operand(v, info.field_name)

    @field_validator("in_", "not_in", mode="before")
    @classmethod
    def _values(cls, v: Any, info: Any) -> Any:
        name = "in" if info.field_name == "in_" else info.field_name
        if not isinstance(v, list):
            raise ValueError(f"{name} takes a list of values, like [EUR, USD]")
        return _json_operand(v, name)

    @field_validator("matches", mode="before")
    @classmethod
    def _pattern(cls, v: Any) -> Any:
        if not isinstance(v, str):
            raise ValueError(f"matches takes a regular expression (a string), not {v!r}")
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"matches: {v!r} is not a regular expression: {exc}") from None
        return v

    def operators(self) -> dict[str, Any]:
        """The operators this test sets, with their operands (an operand may be None)."""
        return {
            ("in" if name == "in_" else name): getattr(self, name)
            for name in type(self).model_fields
            if name in self.model_fields_set
        }


Condition = Annotated[Check, BeforeValidator(_bare_eq)]


class Rule(_Strict):
    """A condition on a call's argument values and the policy that applies when it holds."""

    when: dict[str, Condition]
    policy: Policy
    #: Shown on the card; for `deny`, what the model reads.
    reason: str | None = None

    @field_validator("when", mode="before")
    @classmethod
    def _paths(cls, v: Any) -> Any:
        if isinstance(v, dict):
            if not v:
                raise ValueError("`when` needs a condition; the tool's policy applies otherwise")
            for path in v:
                if not isinstance(path, str) or not _PATH.match(path):
                    raise ValueError(
                        f"{path!r} is not an argument's name or dotted path (customer.country)"
                    )
        return v


class Approvals(_Strict):
    """How many different people must approve a tool's call before it runs (`required`).

    A person is counted once whatever channel they use (see `Skill.people`); one reject
    ends the item, and an edit restarts the count (see `agent.policy.quorum`)."""

    required: int = Field(default=1, ge=1, le=20)


class ToolRule(_Strict):
    policy: Policy = "ask"
    #: Checked in order on the call's arguments; the first that holds decides, else `policy`.
    rules: list[Rule] = []
    impact: Literal["low", "medium", "high"] | None = None
    reversible: bool | None = None
    scope: str | None = None
    idempotent: bool = False
    timeout: Duration | None = None
    on_timeout: Literal["reject", "halt"] = "reject"
    remind_after: Duration | None = None
    escalate_after: Duration | None = None
    escalate_to: Escalation | None = None
    #: What an approver may choose next to Approve so that this tool is not asked about
    #: again: `run` (the rest of this run), a duration (`1h`: this skill, for that long),
    #: `exact` (these arguments, this skill, until revoked); `[]` offers none.
    grants: list[str] = list(DEFAULT_GRANTS)
    #: More than one person for this tool: `{required: 2}` (no grant is offered then).
    approvals: Approvals = Approvals()

    @field_validator("timeout", "remind_after", "escalate_after", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    @field_validator("grants")
    @classmethod
    def _grants(cls, v: list[str]) -> list[str]:
        for choice in v:
            if choice in ("run", "exact"):
                continue
            try:
                seconds = parse_duration(choice)
            except ValueError:
                seconds = 0.0
            if not seconds > 0:
                raise ValueError(f"grant {choice!r}: use run, exact or a duration like 1h or 8h")
        if len(set(v)) != len(v):
            raise ValueError("a grant is listed twice")
        return v

    @model_validator(mode="after")
    def _escalation(self) -> ToolRule:
        if self.escalate_after is not None and self.escalate_to is None:
            raise ValueError("escalate_after needs escalate_to (where the item goes, who decides)")
        return self

    @property
    def risk(self) -> Risk:
        return Risk(impact=self.impact, reversible=self.reversible, scope=self.scope)


class DailyBudget(_Strict):
    """What all runs of one skill may use per day (UTC), together."""

    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0)


class Budget(_Strict):
    """Caps per run (and `per_day` per skill). Unset fields fall back to the server's defaults."""

    tokens: int | None = Field(default=None, ge=1)
    cost_usd: float | None = Field(default=None, gt=0)
    steps: int | None = Field(default=None, ge=1)
    wall_time: Duration | None = None
    per_day: DailyBudget = DailyBudget()

    @field_validator("wall_time", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

    def over(self, defaults: Budget) -> Budget:
        """This budget with `defaults` filling what it leaves unset."""
        own = self.model_dump(exclude_none=True, exclude={"per_day"})
        day = defaults.per_day.model_dump(exclude_none=True) | self.per_day.model_dump(
            exclude_none=True
        )
        merged = defaults.model_dump(exclude_none=True, exclude={"per_day"}) | own
        return Budget(**merged, per_day=DailyBudget(**day))


_PERSON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _people_list(value: Any) -> Any:
    """`approvers: [alice, bob]` names people (`Skill.people`); the mapping form lists
    identities per channel, and may name people too (`people: [alice]`)."""
    return {"people": value} if isinstance(value, list) else value


class Person(_Strict):
    """One human and their identity on each channel, so that a count of approvals counts
    people, not accounts (alice on Slack and alice by email approve once)."""

    slack: str | None = None  # a Slack user id
    email: str | None = None

    @field_validator("slack", "email")
    @classmethod
    def _identity(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None

    @field_validator("email")
    @classmethod
    def _lower(cls, v: str | None) -> str | None:
        return v.lower() if v is not None else None

    def on(self, channel: str) -> str | None:
        """This person's identity on `channel` ("slack", "email"); None: not there."""
        value = getattr(self, channel, None) if channel in ("slack", "email") else None
        return value if isinstance(value, str) else None


class Approvers(_Strict):
    slack: list[str] = []
    email: list[str] = []
    #: Names of people (`Skill.people`), with every identity each has.
    people: list[str] = []

    @field_validator("email")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [a.strip().lower() for a in v]


PeopleOrApprovers = Annotated[Approvers, BeforeValidator(_people_list)]


class Deliver(_Strict):
    slack: str | None = None  # channel id, or a user id for a DM
    email: list[str] = []


class Escalation(Deliver):
    """Where a tool's unanswered item goes after `escalate_after`, and who may then decide.

    The approvers are added to the skill's approvers for that tool's items (from the start:
    deciding stays a stateless check), so the people it escalates to can act on it.
    """

    approvers: PeopleOrApprovers = Approvers()


class Folder(_Strict):
    path: str
    write: bool = False


class Schedule(_Strict):
    cron: str | None = None
    every: Duration | None = None
    input: str = ""
    timezone: str = "UTC"
    misfire: Literal["skip", "run_once"] = "skip"

    @field_validator("every", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)


class Hook(_Strict):
    name: str
    secret_env: str


class DigestAt(_Strict):
    """When the daily digest goes out: `at` ("08:30", 24-hour) in `timezone`."""

    at: Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {v!r} (use a name like Europe/Amsterdam)") from None
        return v


class Defaults(_Strict):
    """What applies to a tool the skill does not list (in `tools`, nor by a pattern)."""

    #: For tools whose MCP annotations say read-only and not destructive; None: ask, as for
    #: any unlisted tool. Annotations are the tool server's own claims, so this is opt-in.
    read_only: Policy | None = None


@dataclass(frozen=True)
class Origin:
    """Where a skill came from: its file, and the line of each rule's condition (by tool
    entry, rule number from 1 and argument path), for problems found once its tools are known."""

    path: str
    lines: Mapping[tuple[str, int, str], int] = field(default_factory=dict)


class Skill(_Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")]
    description: str = ""
    instructions: str
    model: str
    model_options: dict[str, Any] = {}
    mcp_servers: dict[str, StdioServer | HttpServer] = {}
    tools: dict[str, Policy | ToolRule] = {}
    budget: Budget = Budget()
    #: People by name, each with their identities (`alice: {slack: U012, email: a@x}`).
    people: dict[str, Person] = {}
    approvers: PeopleOrApprovers = Approvers()
    deliver: Deliver = Deliver()
    folders: list[Folder] = []
    schedules: list[Schedule] = []
    hooks: list[Hook] = []
    max_tool_result_chars: int = 20_000
    defaults: Defaults = Defaults()
    #: The daily digest of this skill's waiting items (`agent.digest`); None: the server's.
    digest: DigestAt | None = None
    _origin: Origin | None = PrivateAttr(default=None)

    @property
    def origin(self) -> Origin | None:
        """The file this skill was read from (None: built in code)."""
        return self._origin

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name) or "__" in name:
                raise ValueError(f"server name {name!r}: use letters, digits, - and single _")
        return v

    @field_validator("people")
    @classmethod
    def _people(cls, v: dict[str, Person]) -> dict[str, Person]:
        owners: dict[tuple[str, str], str] = {}
        for name, person in v.items():
            if not _PERSON.match(name):
                raise ValueError(f"person {name!r}: use letters, digits, _, . and -")
            if person.slack is None and person.email is None:
                raise ValueError(f"person {name!r} has no identity: give slack, email or both")
            for channel in ("slack", "email"):
                identity = person.on(channel)
                if identity is None:
                    continue
                other = owners.setdefault((channel, identity), name)
                if other != name:
                    raise ValueError(f"{other} and {name} have the same {channel} {identity!r}")
        return v

    @model_validator(mode="after")
    def _named_people(self) -> Skill:
        lists = [("approvers", self.approvers)]
        for key, entry in self.tools.items():
            if isinstance(entry, ToolRule) and entry.escalate_to is not None:
                lists.append((f"tools.{key}.escalate_to.approvers", entry.escalate_to.approvers))
        for where, approvers in lists:
            unknown = [n for n in approvers.people if n not in self.people]
            if unknown:
                known = ", ".join(sorted(self.people)) or "none"
                raise ValueError(
                    f"{where}: {unknown[0]!r} is not in people (people: {known}); "
                    "list a person under people: with their slack id and email"
                )
        return self

    def approvers_for(self, tool: str | None, channel: str) -> list[str]:
        """Who may decide an item of `tool` ("server.tool"; None for a budget item) on a
        channel ("slack": user ids, "email": lowercased addresses): the skill's approvers plus
        the approvers that tool's items escalate to (see `Escalation`); a named person with
        their identity on that channel."""
        lists = [self.approvers]
        escalation = self.rule(tool).escalate_to if tool else None
        if escalation is not None:
            lists.append(escalation.approvers)
        approvers: list[str] = []
        for listed in lists:
            approvers += getattr(listed, channel, []) if channel in ("slack", "email") else []
            for name in listed.people:
                identity = self.people[name].on(channel)
                if identity is not None:
                    approvers.append(identity)
        return approvers

    def approvals_required(self, tool: str | None) -> int:
        """How many different people must approve a call of `tool` (1 for a budget item)."""
        return self.rule(tool).approvals.required if tool else 1

    def rule(self, tool: str) -> ToolRule:
        """The rule for "server.tool": exact name first, then the longest matching pattern.

        An unlisted tool is `ask`: the safe default is to have a human look.
        """
        listed = self.entry(tool)
        return listed[1] if listed is not None else ToolRule()

    def entry(self, tool: str) -> tuple[str, ToolRule] | None:
        """The `tools` entry that covers "server.tool" and its key (the name or the pattern);
        None when the skill does not list it."""
        rules = {
            k: (ToolRule(policy=v) if isinstance(v, str) else v) for k, v in self.tools.items()
        }
        if tool in rules:
            return tool, rules[tool]
        matches = [p for p in rules if any(c in p for c in "*?[") and fnmatch.fnmatchcase(tool, p)]
        if matches:
            key = max(matches, key=len)
            return key, rules[key]
        return None


@dataclass(frozen=True)
class LoadReport:
    skills: dict[str, Skill]
    errors: list[SkillFileError]
    paths: dict[str, Path]


def _line_of(node: yaml.Node | None, loc: Iterable[int | str]) -> int | None:
    """Walk a composed YAML node along a pydantic error location to find its line."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if _is_union_tag(key):
            continue  # pydantic adds union-member names to the path
        if isinstance(node, yaml.MappingNode):
            found = None
            for k, v in node.value:
                if k.value == str(key):
                    found = (k, v)
                    break
            if found is None:
                break
            node = found[1]
            line = found[0].start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            continue  # pydantic adds union-member names to the path; skip them
    return line


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a skill file, at its line (None: the file as a whole)."""

    line: int | None
    message: str


class SkillFileError(SkillError):
    """A refused skill file: every problem with its line, and the skill's name when the file's
    `name:` could be read (so "no skill named x" can say that x's file was refused, and why)."""

    def __init__(self, path: str, problems: list[Problem], *, name: str | None = None) -> None:
        self.problems = problems
        self.name = name
        first = problems[0]
        if len(problems) == 1:
            message = first.message
        else:
            message = f"{len(problems)} problems: " + "; ".join(
                f"line {p.line}: {p.message}" if p.line else p.message for p in problems
            )
        super().__init__(path, first.line, message)
        if len(problems) > 1:
            self.args = (f"{path}: {message}",)

    def __str__(self) -> str:
        return str(self.args[0])


_TOP_NAME = re.compile(r"""^name:[ \t]*["']?([a-z0-9][a-z0-9_-]*)["']?[ \t]*(?:#.*)?$""", re.M)


def parse_skill(text: str, path: str) -> Skill:
    """Parse one skill file's text; raise SkillFileError with every problem and its line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        # The file does not parse, but its top-level `name:` line usually still says which
        # skill it is: enough to answer "run x" with this error rather than "no skill named x".
        named = _TOP_NAME.search(text)
        raise SkillFileError(
            path,
            [Problem(mark.line + 1 if mark else None, f"not valid YAML: {problem}")],
            name=named.group(1) if named else None,
        ) from exc
    if not isinstance(data, dict):
        raise SkillFileError(
            path,
            [Problem(1, "a skill is a YAML mapping with at least name, instructions and model")],
        )
    name = data.get("name") if isinstance(data.get("name"), str) else None
    try:
        skill = Skill.model_validate(data)
    except ValidationError as exc:
        problems = [
            Problem(_line_of(node, loc), message) for loc, message in _explain(exc.errors())
        ]
        problems = sorted(dict.fromkeys(problems), key=lambda p: p.line or 0)
        raise SkillFileError(path, problems, name=name) from exc
    skill._origin = Origin(path, _rule_lines(skill, node))
    return skill


def _rule_lines(skill: Skill, node: yaml.Node | None) -> dict[tuple[str, int, str], int]:
    lines: dict[tuple[str, int, str], int] = {}
    for key, entry in skill.tools.items():
        if isinstance(entry, ToolRule):
            for number, rule in enumerate(entry.rules, 1):
                for path in rule.when:
                    loc: list[int | str] = ["tools", key, "rules", number - 1, "when", path]
                    line = _line_of(node, loc)
                    if line is not None:
                        lines[key, number, path] = line
    return lines


def _explain(errors: list[Any]) -> list[tuple[list[int | str], str]]:
    """Pydantic's errors as what the user should change, each at its location.

    A value that fits no member of a union yields errors for every member: only the member
    the user most likely meant is reported (see `_specificity`). An unknown key is named with
    the known key it is closest to; a required key reported missing beside its misspelling is
    folded into that one message.
    """
    sites: dict[tuple[int | str, ...], dict[tuple[int | str, ...], list[Any]]] = {}
    for e in errors:
        member = _member(e["loc"])
        site = member[:-1] if member and _is_union_tag(member[-1]) else member
        sites.setdefault(site, {}).setdefault(member, []).append(e)
    chosen: list[Any] = []
    for members in sites.values():
        best = max(
            members.values(),
            key=lambda errs: max(_specificity(e, len(errs), _unmatched(errs)) for e in errs),
        )
        chosen += best
    missing = {
        tuple(e["loc"]) for e in chosen if e["type"] == "missing"
    }  # folded away when a misspelt key explains it
    out: list[tuple[list[int | str], str]] = []
    for e in chosen:
        loc = list(e["loc"])
        if e["type"] == "extra_forbidden":
            key, parent = str(loc[-1]), loc[:-1]
            known = _known_keys(parent)
            close = difflib.get_close_matches(key, known, n=1)
            message = f"unknown key `{key}`"
            if close:
                required = (*parent, close[0]) in missing
                missing.discard((*parent, close[0]))
                message += f": did you mean `{close[0]}`?" + (
                    f" (`{close[0]}` is required)" if required else ""
                )
            elif 0 < len(known) <= 8:
                message += f"; the keys here are {', '.join(known)}"
            out.append((loc, _at(parent, message)))
    for e in chosen:
        loc = list(e["loc"])
        if e["type"] == "extra_forbidden" or (e["type"] == "missing" and tuple(loc) not in missing):
            continue
        out.append((loc, _at(loc, e["msg"])))
    return out


def _at(loc: Iterable[int | str], message: str) -> str:
    where = ".".join(str(p) for p in loc if not _is_union_tag(p))
    return f"{where}: {message}" if where else message


def _unmatched(errors: list[Any]) -> int:
    """How many unknown keys of one union member resemble none of that member's keys."""
    count = 0
    for e in errors:
        if e["type"] == "extra_forbidden":
            key, parent = str(e["loc"][-1]), list(e["loc"][:-1])
            count += not difflib.get_close_matches(key, _known_keys(parent), n=1)
    return count


_MODELS: dict[str, type[BaseModel]] = {}
_TAG_MODEL = re.compile(r"(\w+)\]?$")


def _known_keys(loc: Iterable[int | str]) -> list[str]:
    """The keys the mapping at `loc` accepts, found by walking the Skill model's types."""
    if not _MODELS:
        _MODELS.update({m.__name__: m for m in (StdioServer, HttpServer, ToolRule)})
    types: list[Any] = [Skill]
    for part in loc:
        if _is_union_tag(part):
            match = _TAG_MODEL.search(str(part))
            if match and match.group(1) in _MODELS:
                types = [_MODELS[match.group(1)]]
            continue
        step: list[Any] = []
        for t in types:
            if isinstance(t, type) and issubclass(t, BaseModel):
                field = t.model_fields.get(str(part))
                if field is not None:
                    step.append(field.annotation)
            elif get_origin(t) is dict:
                step.append(get_args(t)[1])
            elif get_origin(t) is list:
                step.append(get_args(t)[0])
        types = _flatten(step)
    keys: set[str] = set()
    for t in types:
        if isinstance(t, type) and issubclass(t, BaseModel):
            keys |= set(t.model_fields)
    return sorted(keys)


def _flatten(types: list[Any]) -> list[Any]:
    """Union members and Annotated bases, so a walk can look inside `A | B | None`."""
    out: list[Any] = []
    for t in types:
        origin = get_origin(t)
        if origin in (Union, UnionType):
            out += _flatten(list(get_args(t)))
        elif origin is Annotated:
            out += _flatten([get_args(t)[0]])
        else:
            out.append(t)
    return out


def _specificity(error: Any, complaints: int, unmatched: int) -> tuple[int, int, int, bool]:
    """Deeper locations first; then the union member with the fewest errors, then the one
    whose unknown keys look like misspellings of its own keys; then the member that fits the
    value's shape (a literal for a string, a mapping for a mapping)."""
    loc = error["loc"]
    literal = any(isinstance(p, str) and p.startswith("literal[") for p in loc)
    depth = len([p for p in loc if not _is_union_tag(p)])
    return depth, -complaints, -unmatched, literal == isinstance(error.get("input"), str)


def _member(loc: Iterable[int | str]) -> tuple[int | str, ...]:
    """An error's location up to the first union member it names (the member's identity)."""
    parts: list[int | str] = []
    for part in loc:
        parts.append(part)
        if _is_union_tag(part):
            break
    return tuple(parts)


def _is_union_tag(part: int | str) -> bool:
    return isinstance(part, str) and (
        part in {"StdioServer", "HttpServer", "ToolRule"}
        or part.startswith(("literal[", "function-after[", "function-before["))
    )


def load_skills(folder: Path) -> LoadReport:
    """Load every *.yaml / *.yml in `folder`; bad files are reported, not fatal."""
    skills: dict[str, Skill] = {}
    paths: dict[str, Path] = {}
    errors: list[SkillFileError] = []
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    for file in files:
        try:
            skill = parse_skill(file.read_text(encoding="utf-8"), str(file))
        except SkillFileError as exc:
            errors.append(exc)
            continue
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(SkillFileError(str(file), [Problem(None, f"cannot read: {exc}")]))
            continue
        if skill.name in skills:
            used = f"name {skill.name!r} is already used by {paths[skill.name]}"
            errors.append(SkillFileError(str(file), [Problem(1, used)], name=skill.name))
            continue
        skills[skill.name] = skill
        paths[skill.name] = file
    return LoadReport(skills=skills, errors=errors, paths=paths)


_EPOCH = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Refusal:
    """A file the last load refused; `kept` names the skill whose last good version keeps
    running in its place (None: nothing of it runs)."""

    error: SkillFileError
    kept: str | None = None


@dataclass(frozen=True)
class Reload:
    """What loading the folder again changed."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    @property
    def kept(self) -> list[str]:
        return [r.kept for r in self.refused if r.kept]

    def __str__(self) -> str:
        parts = [
            f"{what} {', '.join(names)}"
            for what, names in (
                ("added", self.added),
                ("changed", self.changed),
                ("removed", self.removed),
            )
            if names
        ]
        for r in self.refused:
            keeps = f" (skill {r.kept} keeps its last good version)" if r.kept else ""
            parts.append(f"refused {r.error}{keeps}")
        return "; ".join(parts) or "nothing changed"


class SkillBook:
    """The skills the server knows, by name; loaded again as a whole when the files change.

    Every version a skill had since the process started is kept (up to `KEEP_VERSIONS`), so a
    run goes on with the version it started with (`for_run`) while new runs get the newest.
    A file that is refused does not take its skill away: the last good version keeps running.
    """

    KEEP_VERSIONS = 50

    def __init__(
        self,
        skills: dict[str, Skill] | None = None,
        *,
        paths: dict[str, Path] | None = None,
        refused: Iterable[SkillFileError] = (),
    ) -> None:
        self._skills = dict(skills or {})
        self._paths = dict(paths or {})
        self._refused = [Refusal(e) for e in refused]
        # The first versions count from the beginning of time: runs created before this
        # process started use them.
        self._versions = {n: [(_EPOCH, s)] for n, s in self._skills.items()}

    @classmethod
    def of(cls, report: LoadReport) -> SkillBook:
        return cls(report.skills, paths=report.paths, refused=report.errors)

    def get(self, name: str) -> Skill:
        """The newest good version of a skill; NotFound says why when its file was refused."""
        from agent.errors import NotFound

        try:
            return self._skills[name]
        except KeyError:
            raise NotFound(self._why_not(name)) from None

    def for_run(self, name: str, created_at: datetime) -> Skill:
        """The version of a skill that was newest when a run was created (a run keeps the
        skill it started with, across reloads; after a restart, the oldest one kept)."""
        versions = self._versions.get(name)
        if not versions:
            return self.get(name)
        fitting = [s for since, s in versions if since <= created_at]
        return fitting[-1] if fitting else versions[0][1]

    def _why_not(self, name: str) -> str:
        for r in self._refused:
            if r.error.name == name:
                return f"skill {name!r} was refused: {r.error}"
        for r in self._refused:
            if r.error.name is None and Path(r.error.path).stem == name:
                return f"no skill named {name!r}; its file was refused: {r.error}"
        known = ", ".join(sorted(self._skills)) or "none"
        return f"no skill named {name!r}; known: {known}"

    def update(self, report: LoadReport, *, now: datetime) -> Reload:
        """Take a new load of the folder; a refused file keeps its skill's last good version."""
        old, old_paths = self._skills, self._paths
        new, paths = dict(report.skills), dict(report.paths)
        refused: list[Refusal] = []
        for err in report.errors:
            kept = err.name if err.name in old and err.name not in new else None
            if kept is None:  # the name could not be read: the file's previous skill
                kept = next(
                    (n for n, p in old_paths.items() if str(p) == err.path and n not in new),
                    None,
                )
            if kept is not None:
                new[kept], paths[kept] = old[kept], old_paths[kept]
            refused.append(Refusal(err, kept))
        change = Reload(
            added=sorted(set(new) - set(old)),
            changed=sorted(n for n in set(new) & set(old) if new[n] != old[n]),
            removed=sorted(set(old) - set(new)),
            refused=refused,
        )
        self._record(new, now)
        self._skills, self._paths, self._refused = new, paths, refused
        return change

    def replace(self, skills: dict[str, Skill]) -> None:
        self._record(skills, datetime.now(UTC))
        self._skills = dict(skills)

    def _record(self, skills: dict[str, Skill], now: datetime) -> None:
        for name, skill in skills.items():
            versions = self._versions.setdefault(name, [])
            if not versions or versions[-1][1] != skill:
                versions.append((now, skill))
                del versions[: -self.KEEP_VERSIONS]

    def refused(self) -> list[Refusal]:
        """The files the last load refused, and which skill each leaves running."""
        return list(self._refused)

    def path(self, name: str) -> Path | None:
        return self._paths.get(name)

    def all(self) -> list[Skill]:
        return [self._skills[k] for k in sorted(self._skills)]

    def __contains__(self, name: object) -> bool:
        return name in self._skills
