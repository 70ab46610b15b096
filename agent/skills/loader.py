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
from pizzabot.agent.skills.skill import Origin, Skill
from pizzabot.agent.skills.tools import ToolRule


@dataclass(frozen=True)
class LoadReport:
    skills: dict[str, Skill]
    errors: list[SkillFileError]
    paths: dict[str, Path]


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
        # A model and instructions come together: a misspelling of one is named as required.
        together = {"model", "instructions"}
        needed = frozenset(together - set(data)) if together & set(data) else frozenset()
        errors = [_placed(e) for e in exc.errors()]
        problems = [
            Problem(_line_of(node, loc), message) for loc, message in _explain(errors, needed)
        ]
        problems = sorted(dict.fromkeys(problems), key=lambda p: p.line or 0)
        raise SkillFileError(path, problems, name=name) from exc
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
