"""Reading skill files: one file's text (`parse_skill`) or a whole folder (`load_skills`),
where a bad file is reported with its problems and the others still load."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pizzabot.agent.skills.errors import Problem, SkillFileError, _explain, _line_of
from pizzabot.agent.skills.groups import Group, SharedGroups
from pizzabot.agent.skills.people import Person
from pizzabot.agent.skills.rota import load_calendar
from pizzabot.agent.skills.skill import Origin, Skill
from pizzabot.agent.skills.tools import ToolRule


@dataclass(frozen=True)
class LoadReport:
    skills: dict[str, Skill]
    errors: list[SkillFileError]
    paths: dict[str, Path]


_TOP_NAME = re.compile(r"""^name:[ \t]*["']?([a-z0-9][a-z0-9_-]*)["']?[ \t]*(?:#.*)?$""", re.M)


#: The skills folder's shared groups and people (`pizzabot.agent.skills.groups.SharedGroups`).
GROUPS_FILES = ("groups.yaml", "groups.yml")


def _read_yaml(text: str, path: str) -> tuple[yaml.Node | None, Any]:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)
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


def _refused(exc: ValidationError, node: yaml.Node | None, needed: frozenset[str]) -> list[Problem]:
    errors = [_placed(e) for e in exc.errors()]
    problems = [Problem(_line_of(node, loc), message) for loc, message in _explain(errors, needed)]
    return sorted(dict.fromkeys(problems), key=lambda p: p.line or 0)


def parse_groups(text: str, path: str) -> SharedGroups:
    """Parse `groups.yaml` (its people and groups, shift calendars read from its folder);
    raise SkillFileError with every problem and its line."""
    node, data = _read_yaml(text, path)
    if not isinstance(data, dict):
        raise SkillFileError(path, [Problem(1, "groups.yaml is a mapping of people: and groups:")])
    try:
        shared = SharedGroups.model_validate(data)
    except ValidationError as exc:
        raise SkillFileError(path, _refused(exc, node, frozenset())) from exc
    _calendars(shared.groups, shared.people, path, node)
    return shared


def _calendars(groups: Any, people: Any, path: str, node: yaml.Node | None) -> None:
    for name, group in groups.items():
        if group.shifts is None:
            continue
        try:
            load_calendar(group.shifts, Path(path).parent, people)
        except ValueError as exc:
            line = _line_of(node, ["groups", name, "shifts"])
            raise SkillFileError(path, [Problem(line, f"groups.{name}.shifts: {exc}")]) from exc


def _shared_into(data: dict[str, Any], shared: SharedGroups, node: yaml.Node | None) -> None:
    """Add the folder's people and groups to a skill's own; one it defines differently is
    a problem at its line."""
    for key, theirs in (("people", shared.people), ("groups", shared.groups)):
        own = data.get(key)
        if not theirs or (own is not None and not isinstance(own, dict)):
            continue
        merged = {k: v.model_dump(exclude_defaults=True) for k, v in theirs.items()}
        for name, value in (own or {}).items():
            if name in merged and merged[name] != _shape(key, value):
                line = _line_of(node, [key, name])
                said = f"{key}.{name}: defined differently in groups.yaml; define it in one place"
                raise SkillFileError("", [Problem(line, said)])
            merged[name] = value
        data[key] = merged


def _shape(key: str, value: Any) -> Any:
    model = Person if key == "people" else Group
    try:
        return model.model_validate(value).model_dump(exclude_defaults=True)
    except ValidationError:
        return value


def parse_skill(text: str, path: str, *, shared: SharedGroups | None = None) -> Skill:
    """Parse one skill file's text (with the folder's `shared` groups and people); raise
    SkillFileError with every problem and its line."""
    node, data = _read_yaml(text, path)
    if not isinstance(data, dict):
        raise SkillFileError(
            path,
            [Problem(1, "a skill is a YAML mapping with at least name, instructions and model")],
        )
    name = data.get("name") if isinstance(data.get("name"), str) else None
    if shared is not None:
        try:
            _shared_into(data, shared, node)
        except SkillFileError as exc:
            raise SkillFileError(path, exc.problems, name=name) from None
    try:
        skill = Skill.model_validate(data)
    except ValidationError as exc:
        # A model and instructions come together: a misspelling of one is named as required.
        together = {"model", "instructions"}
        needed = frozenset(together - set(data)) if together & set(data) else frozenset()
        raise SkillFileError(path, _refused(exc, node, needed), name=name) from exc
    try:
        _calendars(skill.groups, skill.people, path, node)
    except SkillFileError as exc:
        raise SkillFileError(path, exc.problems, name=name) from None
    skill._origin = Origin(path, _rule_lines(skill, node))
    return skill


def _placed(error: Any) -> Any:
    """A check of the whole skill names the key it is about (`ctx["where"]`): the error is
    reported there, at that key's line."""
    where = (error.get("ctx") or {}).get("where")
    return {**error, "loc": tuple(where)} if isinstance(where, tuple) else error


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


def load_skills(folder: Path) -> LoadReport:
    """Load every *.yaml / *.yml in `folder`; bad files are reported, not fatal."""
    skills: dict[str, Skill] = {}
    paths: dict[str, Path] = {}
    errors: list[SkillFileError] = []
    files = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    shared: SharedGroups | None = None
    for file in [f for f in files if f.name in GROUPS_FILES]:
        try:
            shared = parse_groups(file.read_text(encoding="utf-8"), str(file))
        except SkillFileError as exc:
            errors.append(exc)
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(SkillFileError(str(file), [Problem(None, f"cannot read: {exc}")]))
    for file in [f for f in files if f.name not in GROUPS_FILES]:
        try:
            skill = parse_skill(file.read_text(encoding="utf-8"), str(file), shared=shared)
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
