"""Validation errors as a person reads them, placed on the field they belong to.

jsonschema's messages are written for programmers (``1e400 is not of type 'integer'``) and
name places as schema paths. A person editing a form needs "must be a whole number" next to
the input they typed it in, and, inside a JSON input, the place within it (``[0]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pizzabot.agent.argforms.fields import option_text
from pizzabot.agent.argforms.names import escape_name
from pizzabot.agent.argforms.schema_walk import is_null
from pizzabot.agent.argforms.unknown import Path, matches

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

__all__ = ["flatten", "locate", "messages", "one_of", "unknown_message", "where"]

_TYPE_WORDS = {
    "integer": "a whole number",
    "number": "a number",
    "string": "text",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "empty",
}


def unknown_message(path: Path, known: tuple[str, ...]) -> str:
    """Why the field at ``path`` is refused, naming the fields its object does have."""
    owner = "this tool" if len(path) == 1 else where(path[:-1])
    if not known:
        return f"unknown field: {owner} has no fields"
    return f"unknown field; the fields of {owner} are: {', '.join(map(escape_name, known))}"


def flatten(error: ValidationError) -> list[ValidationError]:
    """Look through ``X | None``: report why the value is not an ``X``, not "no branch fits"."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return [error]
    real = [e for e in error.context if not (e.validator == "type" and is_null(e.schema))]
    branches = {e.relative_schema_path[0] for e in real if e.relative_schema_path}
    if len(branches) != 1:
        return [error]
    return [leaf for e in real for leaf in flatten(e)]


def messages(error: ValidationError) -> list[tuple[tuple[Any, ...], str]]:
    """One error as (place in the arguments, message) pairs: a missing or unknown field is
    reported at the field itself, not at the object that holds it."""
    path = tuple(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, Mapping):
        missing = [k for k in error.validator_value if k not in instance]
        return [((*path, k), "is required") for k in missing]
    if error.validator == "additionalProperties" and isinstance(instance, Mapping):
        declared = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = [
            k
            for k in instance
            if k not in declared and not any(matches(p, str(k)) for p in patterns)
        ]
        if extra:
            # Each under its own path, where the check for undeclared fields reported it.
            return [((*path, k), "unknown field") for k in extra]
    return [(path, _human(error))]


def _human(error: ValidationError) -> str:
    v = error.validator_value
    match error.validator:
        case "type":
            names = v if isinstance(v, list) else [v]
            return "must be " + " or ".join(_TYPE_WORDS.get(str(n), str(n)) for n in names)
        case "enum":
            return one_of(v)
        case "const":
            return f"must be {_fmt(v)}"
        case "minimum":
            return f"must be at least {_fmt(v)}"
        case "maximum":
            return f"must be at most {_fmt(v)}"
        case "exclusiveMinimum":
            return f"must be greater than {_fmt(v)}"
        case "exclusiveMaximum":
            return f"must be less than {_fmt(v)}"
        case "multipleOf":
            return f"must be a multiple of {_fmt(v)}"
        case "minLength":
            return "must not be empty" if v == 1 else f"must be at least {v} characters"
        case "maxLength":
            return f"must be at most {v} character{'' if v == 1 else 's'}"
        case "pattern":
            return f"must match the pattern {v}"
        case "format":
            return f"must be a valid {v}"
        case "minItems":
            return f"must have at least {v} item{'' if v == 1 else 's'}"
        case "maxItems":
            return f"must have at most {v} item{'' if v == 1 else 's'}"
        case "uniqueItems":
            return "must not contain duplicates"
        case "anyOf" | "oneOf":
            return "does not match any of the allowed forms"
    return str(error.message)


def one_of(values: Iterable[Any]) -> str:
    """The message for a value that is none of ``values``, listed as the form offers them."""
    return "must be one of: " + ", ".join(option_text(v) for v in values)


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return option_text(value)


def locate(
    fields: Mapping[tuple[str, ...], str], path: tuple[Any, ...], message: str
) -> tuple[str, str]:
    """The field an error at ``path`` belongs to, and the message with the place inside it."""
    for size in range(len(path), -1, -1):
        name = fields.get(tuple(path[:size]))
        if name is not None:
            rest = path[size:]
            return (name, f"{where(rest)}: {message}" if rest else message)
    return ("", f"{where(path)}: {message}" if path else message)


def where(path: Sequence[Any]) -> str:
    """A place in the arguments as a person reads it: ``address.lines[0]``."""
    out = ""
    for part in path:
        name = escape_name(str(part))
        out += f"[{part}]" if isinstance(part, int) else f".{name}" if out else name
    return out
