"""What a request may ask, checked before anything is written: each problem named by its
field (`InvalidArguments`), so an agent sending a bad request is told what to change.

Sizes are bounded (the arguments and the schema as JSON, the time-out), and so is their
shape: every number finite and of a size a form field takes (`NaN`, `Infinity` or `1e500000`
would be judged by the rules as something they are not, and stored as null), and nothing
nested deeper than `pizzabot.agent.argforms.MAX_NESTING`. An approval's schema must be a JSON schema of
an object (JSON Schema's own meta-schema says whether it is one) that a value can be checked
against in finite time (no `$ref` cycle that never steps into the value), and the proposed
arguments must pass it; a question's schema is a flat form (`pizzabot.agent.questions.check_schema`),
which every channel can draw. The rules (`pizzabot.agent.policy.rules.judge`) only ever see
arguments that passed all this.

`value_problems` is the check of a value's shape and numbers alone, for the MCP tools that
hand requests in, so an agent there is told before anything is filed.
"""

from __future__ import annotations

import json
from typing import Any

from pizzabot.agent.argforms import validate_arguments
from pizzabot.agent.argforms.messages import where
from pizzabot.agent.argforms.numbers import out_of_range
from pizzabot.agent.argforms.schema_shape import nesting_problem, schema_problem
from pizzabot.agent.argforms.validate import schema_error
from pizzabot.agent.errors import InvalidArguments
from pizzabot.agent.questions import check_schema
from pizzabot.agent.request_state import NewRequest

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_PREVIEW",
    "MAX_TIMEOUT",
    "check_request",
    "number_problems",
    "value_problems",
]

#: The largest `args` or `schema` a request may carry, as JSON.
MAX_JSON_BYTES = 64_000
#: The longest a request may wait for a person (seconds): a week.
MAX_TIMEOUT = 7 * 86400.0
#: The longest preview text a request may send (its card keeps
#: `pizzabot.agent.preview.PREVIEW_CAP` characters of it).
MAX_PREVIEW = 20_000


def _json_size(value: Any) -> int:
    return len(json.dumps(value, default=str))


def check_request(new: NewRequest) -> None:
    """Refuse what cannot be asked, naming the field (`InvalidArguments`)."""
    errors: dict[str, str] = {}
    if not new.title.strip():
        errors["title"] = "say in a few words what is asked"
    if new.tool is not None and new.question is not None:
        errors["question"] = "ask a question or request a tool call, not both"
    if new.tool is None and not (new.question or "").strip():
        errors["tool"] = "name the tool to approve (or ask a question)"
    if new.tool is not None and not new.tool.strip():
        errors["tool"] = "name the tool to approve"
    shape = value_problems("args", new.args)
    if shape:
        errors.update(shape)
    elif _json_size(new.args) > MAX_JSON_BYTES:
        errors["args"] = f"larger than {MAX_JSON_BYTES} bytes as JSON"
    if new.preview is not None:
        if new.tool is None:
            errors["preview"] = "a question has no call to preview; send preview with tool"
        elif len(new.preview) > MAX_PREVIEW:
            errors["preview"] = f"longer than {MAX_PREVIEW} characters"
    if new.timeout is not None and not 1 <= new.timeout <= MAX_TIMEOUT:
        errors["timeout"] = f"between 1 and {MAX_TIMEOUT:.0f} seconds"
    if new.schema is not None:
        why = _schema_problem(new)
        if why is not None:
            errors["schema"] = why
    if not errors and new.schema is not None and new.kind == "approval":
        # A question's proposed values may leave required fields to the person.
        for name, message in validate_arguments(new.schema, new.args).items():
            errors[f"args.{name}" if name else "args"] = message
    if errors:
        raise InvalidArguments(errors)


def number_problems(name: str, value: Any) -> dict[str, str]:
    """Each number in `value` that is not finite or has too many digits, keyed by its place
    under `name` ("args.amount"): what a request may not carry."""
    return {_place(name, path): message for path, message in out_of_range(value)}


def _place(name: str, path: tuple[Any, ...]) -> str:
    inner = where(path)
    return f"{name}{'' if inner.startswith('[') else '.'}{inner}" if inner else name


def value_problems(name: str, value: Any) -> dict[str, str]:
    """What a request's `args` (or any JSON it hands in) may not hold: nesting deeper than
    `pizzabot.agent.argforms.MAX_NESTING`, and the numbers `number_problems` finds; by place."""
    deep = nesting_problem(value)
    if deep is not None:
        path, message = deep
        return {_place(name, path): message}
    return number_problems(name, value)


def _schema_problem(new: NewRequest) -> str | None:
    schema = new.schema
    assert schema is not None
    numbers = number_problems("schema", schema)
    if numbers:
        place, message = next(iter(numbers.items()))
        return f"{place}: {message}"
    shape = schema_problem(schema)
    if shape is not None:
        return shape
    if _json_size(schema) > MAX_JSON_BYTES:
        return f"larger than {MAX_JSON_BYTES} bytes as JSON"
    if new.kind == "question":
        return check_schema(schema)
    if schema.get("type") != "object":
        return 'the arguments are an object: the schema needs "type": "object"'
    broken = schema_error(schema)
    return f"not a valid JSON schema: {broken}" if broken is not None else None
