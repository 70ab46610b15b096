"""Numbers with bounds, wherever arguments are read: a form field, JSON from a model, a mail.

JSON Schema puts no limit on a number, but arguments come from people and models, not from
programs that agree on a format. Turning ``1e1000000`` into an ``int`` takes seconds of CPU
on the event loop, and Python refuses to print an ``int`` of more than 4300 digits. So here a
whole number has at most :data:`MAX_INTEGER_DIGITS` digits, any number must be finite, and
number text is at most :data:`MAX_NUMBER_TEXT` characters; breaking a bound is a field error,
checked before anything converts the text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = [
    "MAX_INTEGER_DIGITS",
    "MAX_NUMBER_TEXT",
    "NumbersOutOfRange",
    "bounded_decoder",
    "loads_body",
    "loads_json",
    "out_of_range",
    "parse_integer",
    "parse_number",
]

#: Digits a whole number may have: far beyond any id or amount, and cheap to convert.
MAX_INTEGER_DIGITS = 100
#: Characters a typed number may have, exponent and sign included.
MAX_NUMBER_TEXT = 200
_INTEGER_LIMIT = 10**MAX_INTEGER_DIGITS
_FLOAT_EXPONENT = 308  # beyond it a double is infinite (or zero)
_TOO_MANY_DIGITS = f"is out of range: a whole number has at most {MAX_INTEGER_DIGITS} digits"
_NOT_FINITE = "is out of range: must be a finite number"


# --- typed text --------------------------------------------------------------------------


def parse_integer(text: str) -> int:
    """A whole number typed in a form field; ``ValueError`` with a message for a person."""
    number = _decimal(text, "must be a whole number")
    if number != number.to_integral_value():
        raise ValueError("must be a whole number")
    if number.adjusted() >= MAX_INTEGER_DIGITS:
        raise ValueError(_TOO_MANY_DIGITS)
    return int(number)


def parse_number(text: str) -> int | float:
    """A number typed in a form field: an ``int`` when written whole (``3``), else a
    ``float``; ``ValueError`` with a message for a person."""
    number = _decimal(text, "must be a number")
    whole = number == number.to_integral_value() and not any(c in text for c in ".eE")
    if whole and number.adjusted() < MAX_INTEGER_DIGITS:
        return int(number)
    return _float(number)


def _decimal(text: str, message: str) -> Decimal:
    """The number typed, with its size checked before anything converts it: ``int()`` of
    ``Decimal("1e1000000")`` takes seconds."""
    text = text.strip()
    if len(text) > MAX_NUMBER_TEXT:
        raise ValueError(f"is too long for a number (at most {MAX_NUMBER_TEXT} characters)")
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(message) from None
    if not number.is_finite():
        raise ValueError(message)
    return number


def _float(number: Decimal) -> float:
    if number and abs(number.adjusted()) > _FLOAT_EXPONENT:
        raise ValueError(_NOT_FINITE if number.adjusted() > 0 else "is too small: use 0")
    value = float(number)
    if not math.isfinite(value):
        raise ValueError(_NOT_FINITE)
    return value


# --- JSON with bounded numbers -----------------------------------------------------------


class _OutOfRange(ValueError):
    pass


def _json_int(text: str) -> int:
    # Counted before int(): Python refuses > 4300 digits, and converting fewer is still slow.
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _OutOfRange(f"a number {_TOO_MANY_DIGITS}")
    return int(text)


def _json_float(text: str) -> float:
    if len(text) > MAX_NUMBER_TEXT:
        raise _OutOfRange(f"a number is too long (at most {MAX_NUMBER_TEXT} characters)")
    try:
        return _float(Decimal(text))
    except ValueError as exc:
        raise _OutOfRange(f"a number {exc}") from None


def _json_constant(name: str) -> Any:
    raise _OutOfRange(f"{name} is not a number JSON allows")


def bounded_decoder() -> json.JSONDecoder:
    """A JSON decoder whose numbers are bounded as in a form field (``raw_decode`` for JSON
    with text after it, as in a mail); its errors are ``ValueError``s."""
    return json.JSONDecoder(
        parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant
    )


def loads_json(text: str) -> Any:
    """JSON from text, with each number bounded as in a form field.

    Raises ``ValueError`` with a message for a person: invalid JSON, a number out of range,
    ``NaN``/``Infinity`` (which Python's ``json`` would otherwise accept), or nesting too
    deep to read.
    """
    try:
        return bounded_decoder().decode(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except _OutOfRange as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None


class NumbersOutOfRange(ValueError):
    """JSON that holds numbers no field accepts; `errors` names each by its place in the
    document (``args.copies``, ``items[2]``), as a 422 answer does."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{k}: {v}" if k else v for k, v in errors.items()))


class _Refused:
    """Where a number was refused while parsing: found again by place once parsing is done."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def loads_body(data: str | bytes) -> Any:
    """A JSON document (an HTTP body) whose numbers are all finite and of bounded size.

    Python's ``json`` reads ``NaN``, ``Infinity`` and ``-Infinity`` (JSON has none of them)
    and turns ``1e500000`` into infinity, each of which would be judged, stored and shown as
    something it is not. Here each such number is refused by its place in the document
    (`NumbersOutOfRange`); invalid JSON raises ``json.JSONDecodeError``, and nesting too deep
    for the parser ``RecursionError``.
    """
    refused = False

    def refuse(message: str) -> _Refused:
        nonlocal refused
        refused = True
        return _Refused(message)

    def number(text: str) -> float | _Refused:
        value = float(text)
        return value if math.isfinite(value) else refuse(_NOT_FINITE)

    def whole(text: str) -> int | _Refused:
        if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
            return refuse(_TOO_MANY_DIGITS)
        return int(text)

    document = json.loads(
        data,
        parse_float=number,
        parse_int=whole,
        parse_constant=lambda name: refuse(_NOT_FINITE),
    )
    if refused:
        raise NumbersOutOfRange(_refused_places(document))
    return document


def _refused_places(document: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        place, value = stack.pop()
        if isinstance(value, _Refused):
            found[place] = value.message
        elif isinstance(value, dict):
            stack.extend((f"{place}.{k}" if place else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{place}[{i}]", v) for i, v in enumerate(value))
    return dict(sorted(found.items()))


# --- arguments that are already values ---------------------------------------------------


def out_of_range(value: Any) -> list[tuple[tuple[Any, ...], str]]:
    """Where ``value`` holds a number no field accepts (infinite, NaN, too many digits), and
    which limit it broke."""
    bad: list[tuple[tuple[Any, ...], str]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:  # a loop, not recursion: JSON nests as deep as its parser allowed
        path, current = stack.pop()
        if isinstance(current, bool):
            continue
        if isinstance(current, int):
            if abs(current) >= _INTEGER_LIMIT:
                bad.append((path, _TOO_MANY_DIGITS))
        elif isinstance(current, float):
            if not math.isfinite(current):
                bad.append((path, _NOT_FINITE))
        elif isinstance(current, Mapping):
            stack.extend(((*path, k), v) for k, v in current.items())
        elif isinstance(current, list | tuple):
            stack.extend(((*path, i), v) for i, v in enumerate(current))
    return sorted(bad, key=lambda found: str(found[0]))
