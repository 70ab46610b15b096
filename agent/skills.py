"""Skills: what a user writes in YAML to describe one kind of background work.

A skill names the model, the MCP servers, the policy per tool, who may approve, where the
inbox goes and the budgets. Loading is strict: a bad file is refused with the file, the line
and what is wrong, and the other skills still load.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
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


class ToolRule(_Strict):
    policy: Policy = "ask"
    impact: Literal["low", "medium", "high"] | None = None
    reversible: bool | None = None
    scope: str | None = None
    idempotent: bool = False
    timeout: Duration | None = None
    on_timeout: Literal["reject", "halt"] = "reject"
    remind_after: Duration | None = None
    escalate_after: Duration | None = None
    escalate_to: Escalation | None = None

    @field_validator("timeout", "remind_after", "escalate_after", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)

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


class Approvers(_Strict):
    slack: list[str] = []
    email: list[str] = []

    @field_validator("email")
    @classmethod
    def _lower(cls, v: list[str]) -> list[str]:
        return [a.strip().lower() for a in v]


class Deliver(_Strict):
    slack: str | None = None  # channel id, or a user id for a DM
    email: list[str] = []


class Escalation(Deliver):
    """Where a tool's unanswered item goes after `escalate_after`, and who may then decide.

    The approvers are added to the skill's approvers for that tool's items (from the start:
    deciding stays a stateless check), so the people it escalates to can act on it.
    """

    approvers: Approvers = Approvers()


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


class Skill(_Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")]
    description: str = ""
    instructions: str
    model: str
    model_options: dict[str, Any] = {}
    mcp_servers: dict[str, StdioServer | HttpServer] = {}
    tools: dict[str, Policy | ToolRule] = {}
    budget: Budget = Budget()
    approvers: Approvers = Approvers()
    deliver: Deliver = Deliver()
    folders: list[Folder] = []
    schedules: list[Schedule] = []
    hooks: list[Hook] = []
    max_tool_result_chars: int = 20_000

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name) or "__" in name:
                raise ValueError(f"server name {name!r}: use letters, digits, - and single _")
        return v

    def approvers_for(self, tool: str | None, channel: str) -> list[str]:
        """Who may decide an item of `tool` ("server.tool"; None for a budget item) on a
        channel ("slack": user ids, "email": lowercased addresses): the skill's approvers plus
        the approvers that tool's items escalate to (see `Escalation`)."""
        approvers: list[str] = list(getattr(self.approvers, channel, []))
        escalation = self.rule(tool).escalate_to if tool else None
        if escalation is not None:
            approvers += getattr(escalation.approvers, channel, [])
        return approvers

    def rule(self, tool: str) -> ToolRule:
        """The rule for "server.tool": exact name first, then the longest matching pattern.

        An unlisted tool is `ask`: the safe default is to have a human look.
        """
        rules = {
            k: (ToolRule(policy=v) if isinstance(v, str) else v) for k, v in self.tools.items()
        }
        if tool in rules:
            return rules[tool]
        matches = [p for p in rules if any(c in p for c in "*?[") and fnmatch.fnmatchcase(tool, p)]
        if matches:
            return rules[max(matches, key=len)]
        return ToolRule()


@dataclass(frozen=True)
class LoadReport:
    skills: dict[str, Skill]
    errors: list[SkillError]
    paths: dict[str, Path]


def _line_of(node: yaml.Node | None, loc: Iterable[int | str]) -> int | None:
    """Walk a composed YAML node along a pydantic error location to find its line."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
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


def parse_skill(text: str, path: str) -> Skill:
    """Parse one skill file's text; raise SkillError with the line of the first problem."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SkillError(
            path, mark.line + 1 if mark else None, f"not valid YAML: {problem}"
        ) from exc
    if not isinstance(data, dict):
        raise SkillError(
            path, 1, "a skill is a YAML mapping with at least name, instructions and model"
        )
    try:
        return Skill.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # A value that fits no member of a union yields one error per member; the member that
        # got furthest into the value (the deepest location) says the most useful thing.
        # At equal depth, the member with the fewest complaints is the one the user meant.
        complaints = Counter(_member(e["loc"]) for e in errors)
        err = max(errors, key=lambda e: _specificity(e, complaints[_member(e["loc"])]))
        loc = list(err["loc"])
        line = _line_of(node, loc)
        where = ".".join(str(p) for p in loc if not _is_union_tag(p)) or "(top)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise SkillError(path, line, f"{where}: {err['msg']}{more}") from exc


def _specificity(error: Any, complaints: int) -> tuple[int, int, bool]:
    """Deeper locations first; then the union member with the fewest errors; then the member
    that fits the value's shape (a literal for a string, a mapping for a mapping)."""
    loc = error["loc"]
    literal = any(isinstance(p, str) and p.startswith("literal[") for p in loc)
    depth = len([p for p in loc if not _is_union_tag(p)])
    return depth, -complaints, literal == isinstance(error.get("input"), str)


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
    errors: list[SkillError] = []
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    for file in files:
        try:
            skill = parse_skill(file.read_text(encoding="utf-8"), str(file))
        except SkillError as exc:
            errors.append(exc)
            continue
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(SkillError(str(file), None, f"cannot read: {exc}"))
            continue
        if skill.name in skills:
            errors.append(
                SkillError(
                    str(file), 1, f"name {skill.name!r} is already used by {paths[skill.name]}"
                )
            )
            continue
        skills[skill.name] = skill
        paths[skill.name] = file
    return LoadReport(skills=skills, errors=errors, paths=paths)


class SkillBook:
    """The skills the server knows, by name; reloadable as a whole."""

    def __init__(self, skills: dict[str, Skill] | None = None) -> None:
        self._skills = dict(skills or {})

    def get(self, name: str) -> Skill:
        from agent.errors import NotFound

        try:
            return self._skills[name]
        except KeyError:
            raise NotFound(
                f"no skill named {name!r}; known: {', '.join(sorted(self._skills)) or 'none'}"
            ) from None

    def replace(self, skills: dict[str, Skill]) -> None:
        self._skills = dict(skills)

    def all(self) -> list[Skill]:
        return [self._skills[k] for k in sorted(self._skills)]

    def __contains__(self, name: object) -> bool:
        return name in self._skills
