"""A refused skill file (`SkillFileError`, each `Problem` at its line), and how pydantic's
errors become what the user should change: the line of each in the YAML, one message per
mistake (the union member the user meant), and "did you mean" for a misspelt key."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel

from pizzabot.agent.errors import SkillError
from pizzabot.agent.skills.servers import HttpServer, StdioServer
from pizzabot.agent.skills.skill import Skill
from pizzabot.agent.skills.tools import ToolRule


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


def _explain(
    errors: list[Any], required_: frozenset[str] = frozenset()
) -> list[tuple[list[int | str], str]]:
    """Pydantic's errors as what the user should change, each at its location.

    A value that fits no member of a union yields errors for every member: only the member
    the user most likely meant is reported (see `_specificity`). An unknown key is named with
    the known key it is closest to; a required key reported missing beside its misspelling is
    folded into that one message. Top-level keys this file needs though the
    model does not require them alone (`required_`: a skill with a model needs instructions, and one
    with instructions a model).
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
                required = (*parent, close[0]) in missing or (not parent and close[0] in required_)
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
                field = _fields(t).get(str(part))
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
            keys |= set(_fields(t))
    return sorted(keys)


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields by the key a file writes (`in`, `self_approval`: an alias)."""
    return {(f.alias or name): f for name, f in model.model_fields.items()}


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
