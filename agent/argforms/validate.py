"""Tool arguments checked against the tool's schema, with errors keyed by form field name.

The engine checks arguments that arrive as JSON (an API edit, a model's call) and the form
channels check what people typed with this same function, so a value is accepted or refused
the same way whichever way it came in. On top of the schema, numbers are bounded
(:mod:`pizzabot.agent.argforms.numbers`), undeclared fields are refused
(:mod:`pizzabot.agent.argforms.unknown`), and a schema or arguments that no check could finish with
(nested too deep, a ``$ref`` cycle: :mod:`pizzabot.agent.argforms.schema_shape`) are an error, never
a ``RecursionError``.

Checking a schema against JSON Schema's meta-schema costs about a millisecond, and the same
tool schema is checked on every call of that tool, so that answer (with the search for
``$ref`` cycles) is kept per schema text.

Remote ``$ref``s are never fetched (jsonschema would, by default), because a tool's schema is
not trusted to make this process open URLs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from pizzabot.agent.argforms.messages import flatten, locate, messages, unknown_message, where
from pizzabot.agent.argforms.numbers import out_of_range
from pizzabot.agent.argforms.schema_shape import nesting_problem, schema_problem
from pizzabot.agent.argforms.schema_walk import Schema, leaves, tree
from pizzabot.agent.argforms.unknown import undeclared

__all__ = ["add_error", "schema_error", "validate_arguments"]


def validate_arguments(schema: Schema, args: Mapping[str, Any]) -> dict[str, str]:
    """Check ``args`` against ``schema``; human messages keyed by form field name.

    Errors inside a field (an item of a JSON list) name their place: ``"[0]: must be text"``.
    Errors tied to no field go under ``""``, joined with ``"; "``. A field the schema does not
    declare is an error under its own dotted name (``copy``, ``address.zip``) that lists the
    known ones; a number out of range is an error before the schema is even consulted.
    """
    deep = nesting_problem(args)
    if deep is not None:
        path, message = deep
        return {where(path) if path else "": message}
    broken, text = _schema_error(schema)
    if broken is not None:
        return {"": f"the tool's input schema is invalid: {broken}"}
    fields, validator = _prepared(text)
    errors: dict[str, str] = {}
    # First, and alone: jsonschema's messages repr() the value, which fails past 4300 digits.
    for path, message in out_of_range(args):
        add_error(errors, *locate(fields, path, message))
    if errors:
        return errors
    import referencing.exceptions  # imported with the validator (`_prepared`)

    try:
        found = list(validator.iter_errors(dict(args)))
    except referencing.exceptions.Unresolvable as exc:
        return {"": f"the tool's input schema refers to something unavailable: {exc}"}
    except RecursionError:  # the bounds above keep this away; never a crash if not
        return {"": "the tool's input schema, with these arguments, nests too deeply to check"}
    unknown = undeclared(schema, args)
    for path, known in unknown:
        name, message = locate(fields, path, unknown_message(path, known))
        if name == "" and path:
            name, message = where(path), unknown_message(path, known)
        add_error(errors, name, message)
    reported = {path for path, _ in unknown}
    for error in found:
        for leaf_error in flatten(error):
            for path, message in messages(leaf_error):
                if path in reported:
                    continue
                add_error(errors, *locate(fields, path, message))
    return errors


def schema_error(schema: Schema) -> str | None:
    """Why `schema` cannot check anything (nested too deep, a `$ref` cycle, or what JSON
    Schema's meta-schema says of it); None when it can."""
    return _schema_error(schema)[0]


def _schema_error(schema: Schema) -> tuple[str | None, str]:
    """`schema_error`, and the schema's text that keys what is kept of it."""
    deep = schema_problem(schema, cycles=False)  # first: the rest walks it by recursion
    if deep is not None:
        return deep, ""
    text = json.dumps(schema, sort_keys=True, default=str)
    return _checked(text), text


@functools.lru_cache(maxsize=256)
def _prepared(text: str) -> tuple[Mapping[tuple[str, ...], str], Any]:
    """A valid schema's form fields by path and its validator, made once per schema text
    (making a validator costs more than most checks with it)."""
    # Imported with the first check: ~6 MiB and ~80 ms that a server which has not yet
    # checked a call's arguments does not carry.
    import jsonschema
    import referencing

    schema = json.loads(text)
    fields = {leaf.path: leaf.name for leaf in leaves(tree(schema))}
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    # An empty registry: without one jsonschema fetches remote $refs over the network.
    return fields, cls(schema, registry=referencing.Registry(), format_checker=cls.FORMAT_CHECKER)


@functools.lru_cache(maxsize=512)
def _checked(text: str) -> str | None:
    schema = json.loads(text)
    cycle = schema_problem(schema)
    if cycle is not None:
        return cycle
    import jsonschema  # with the first check, as in `validate_arguments`

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return str(exc.message)
    return None


def add_error(errors: dict[str, str], name: str, message: str) -> None:
    """Keep the first error of a field; errors tied to no field (``""``) are all kept."""
    if name == "" and "" in errors:
        errors[""] = f"{errors['']}; {message}"
    errors.setdefault(name, message)
