"""What a request may ask, checked before anything is written: each problem named by its
field (`InvalidArguments`), so an agent sending a bad request is told what to change.

Sizes are bounded (the arguments and the schema as JSON, the time-out); an approval's schema
must be a JSON schema of an object (JSON Schema's own meta-schema says whether it is one),
and the proposed arguments must pass it; a question's schema is a flat form
(`agent.questions.check_schema`), which every channel can draw.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import jsonschema

from agent.argforms import validate_arguments
from agent.errors import InvalidArguments
from agent.questions import check_schema

if TYPE_CHECKING:
    from agent.requests import NewRequest

__all__ = ["MAX_JSON_BYTES", "MAX_TIMEOUT", "check_request"]

#: The largest `args` or `schema` a request may carry, as JSON.
MAX_JSON_BYTES = 64_000
#: The longest a request may wait for a person (seconds): a week.
MAX_TIMEOUT = 7 * 86400.0


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
    if _json_size(new.args) > MAX_JSON_BYTES:
        errors["args"] = f"larger than {MAX_JSON_BYTES} bytes as JSON"
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


def _schema_problem(new: NewRequest) -> str | None:
    schema = new.schema
    if _json_size(schema) > MAX_JSON_BYTES:
        return f"larger than {MAX_JSON_BYTES} bytes as JSON"
    if new.kind == "question":
        return check_schema(schema)
    assert schema is not None
    if schema.get("type") != "object":
        return 'the arguments are an object: the schema needs "type": "object"'
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"not a valid JSON schema: {exc.message}"
    return None
