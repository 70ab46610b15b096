"""Whether one rule's conditions hold for a call's arguments: yes, no, or maybe.

`pizzabot.agent.policy.rules.judge` takes the first rule that holds, and weighs a rule that only may
hold against what follows it; this module answers the question per rule (`matches`) and per
argument (`holds`), with the words that say why a maybe is one (the doubt), for the card and
the model. The table of what holds is in `pizzabot.agent.policy.rules`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pizzabot.agent.shell import Command, Truth, fold, parse_command, runs
from pizzabot.agent.skills import Check, Rule

__all__ = ["Finding", "holds", "matches"]

#: An argument that is not there (`holds`' value).
_MISSING = object()


@dataclass(frozen=True)
class Finding:
    """Whether a condition holds: `doubt` says why it only may (`Truth.MAYBE`)."""

    truth: Truth
    doubt: str | None = None


_YES, _NO = Finding(Truth.YES), Finding(Truth.NO)


def matches(rule: Rule, args: Mapping[str, Any]) -> Finding:
    """Whether every condition of the rule's `when` holds for `args` (the least of them)."""
    least = _YES
    for path, check in rule.when.items():
        found = holds(check, _at(args, path), path)
        if found.truth < least.truth:
            least = found
        if least.truth is Truth.NO:
            break
    return least


def holds(check: Check, value: Any, name: str = "the argument") -> Finding:
    """Whether every operator of `check` holds for `value` (`_MISSING`: the argument is not
    there), the least of them; `name` is the argument's path, for the doubt's words."""
    least = _YES
    for op, operand in check.operators().items():
        found = _holds(op, operand, value, name)
        if found.truth < least.truth:
            least = found
        if least.truth is Truth.NO:
            break
    return least


def _holds(op: str, operand: Any, value: Any, name: str) -> Finding:
    absent = value is _MISSING or value is None
    match op:
        case "present":
            if absent:
                return _NO if operand else _YES
            if _blank(value):
                return Finding(Truth.MAYBE, f"{name} is given, but empty")
            return _YES if operand else _NO
        case "eq" | "in":
            return _one_of(value, [operand] if op == "eq" else operand, name)
        case "ne" | "not_in":
            operands = [operand] if op == "ne" else operand
            if value is _MISSING or (value is None and all(o is not None for o in operands)):
                return Finding(
                    Truth.MAYBE, f"{name} is not given, and the tool's default may be anything"
                )
            found = _one_of(value, operands, name)
            return Finding(Truth(Truth.YES - found.truth), found.doubt)
        case "lt" | "lte" | "gt" | "gte":
            if absent:
                return _NO
            if not _number(value):
                return Finding(
                    Truth.MAYBE, f"{name} is {_shown(value)}, and the rule compares numbers"
                )
            # Python compares an int with a float exactly, however large the int.
            return _YES if _COMPARE[op](value, operand) else _NO
        case "matches":
            if absent:
                return _NO
            if not isinstance(value, str):
                return Finding(Truth.MAYBE, f"{name} is {_shown(value)}, and the rule reads text")
            if re.fullmatch(operand, value) is not None:
                return _YES
            if any(re.fullmatch(operand, v, re.IGNORECASE) for v in (value, fold(value))):
                return Finding(Truth.MAYBE, f"{name} matches but for case or Unicode form")
            return _NO
        case "runs":
            if absent:
                return _NO
            if not (
                isinstance(value, str)
                or (isinstance(value, list) and all(isinstance(w, str) for w in value))
            ):
                return Finding(
                    Truth.MAYBE, f"{name} is {_shown(value)}, not a command line or a list of words"
                )
            truth, why = runs(_command(operand), value)
            return Finding(truth, f"{name}: {why}" if why else None)
    raise ValueError(f"unknown operator {op!r}")  # the skill's schema admits no other


_COMPARE = {
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
}


def _one_of(value: Any, operands: list[Any], name: str) -> Finding:
    """Whether `value` is one of `operands` (`eq` is `in` of one): a value of a JSON type
    none of them has may be any of them."""
    if value is _MISSING:
        wants_null = any(o is None for o in operands)
        return Finding(Truth.MAYBE, f"{name} is not given: it may be null") if wants_null else _NO
    if value is None:
        return _YES if any(o is None for o in operands) else _NO
    kind = _kind(value)
    typed = [o for o in operands if o is not None]  # null is a value, not a type
    alike = [o for o in typed if _kind(o) == kind]
    if not alike:
        if not typed:
            return _NO
        kinds = sorted({_KIND_WORDS[_kind(o)] for o in typed})
        return Finding(
            Truth.MAYBE, f"{name} is {_shown(value)}, and the rule has {' or '.join(kinds)}"
        )
    best = _NO
    for operand in alike:
        found = _same(value, operand, name)
        if found.truth > best.truth:
            best = found
        if best.truth is Truth.YES:
            break
    return best


def _same(value: Any, operand: Any, name: str) -> Finding:
    """JSON equality, three-valued: 1 and 1.0 are the same number, but true is not 1 and "1"
    is not 1 (a different type: maybe); text that differs only in case, Unicode form or
    surrounding space maybe is the same."""
    kind = _kind(value)
    if kind != _kind(operand):
        return Finding(
            Truth.MAYBE, f"{name} holds {_shown(value)} where the rule has {_shown(operand)}"
        )
    match kind:
        case "string":
            if value == operand:
                return _YES
            if fold(value) == fold(operand):
                return Finding(
                    Truth.MAYBE,
                    f"{name} is {value!r}, which is {operand!r} but for case, Unicode form "
                    "or spaces",
                )
            return _NO
        case "number":
            if not (_number(value) and _number(operand)):
                return Finding(Truth.MAYBE, f"{name} is {_shown(value)}")
            return _YES if value == operand else _NO
        case "array":
            if len(value) != len(operand):
                return _NO
            return min(
                (_same(v, o, name) for v, o in zip(value, operand, strict=True)),
                key=lambda f: f.truth,
                default=_YES,
            )
        case "object":
            if value.keys() != operand.keys():
                return _NO
            return min(
                (_same(value[k], operand[k], f"{name}.{k}") for k in value),
                key=lambda f: f.truth,
                default=_YES,
            )
    return _YES if value == operand else _NO  # null, true, false


def _number(value: Any) -> bool:
    """A finite JSON number: not a string that looks like one, and not a bool (an int in
    Python)."""
    if isinstance(value, bool):
        return False
    # An int is always finite (and may be too large for a float: isfinite would raise).
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _kind(value: Any) -> str:
    """The JSON type of a value ("number" for int and float alike)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


_KIND_WORDS = {
    "boolean": "true or false",
    "number": "numbers",
    "string": "text",
    "array": "lists",
    "object": "objects",
}


def _shown(value: Any) -> str:
    """A value as a doubt names it: its type, and a short form of it."""
    match _kind(value):
        case "string":
            text = value if len(value) <= 40 else value[:39] + "…"
            return f"the text {text!r}"
        case "boolean":
            return f"the value {'true' if value else 'false'}"
        case "number":
            if isinstance(value, int) and value.bit_length() > 256:
                return "a number of many digits"
            return f"the number {value}" if _number(value) else f"{value}, not a finite number"
        case "array":
            return "a list"
        case "object":
            return "an object"
        case "null":
            return "null"
    return f"a {type(value).__name__}"


def _blank(value: Any) -> bool:
    """Given, but nothing in it: "", spaces alone, [] or {}; a tool may take it for absent."""
    if isinstance(value, str):
        return fold(value) == ""
    return isinstance(value, list | tuple | Mapping) and not value


@functools.lru_cache(maxsize=256)
def _command(text: str) -> Command:
    return parse_command(text)


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
