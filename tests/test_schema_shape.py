"""Schemas and arguments no check could finish with: named, with where, before jsonschema
recurses into them; and a schema that only refers to itself through its value's parts is
fine."""

from __future__ import annotations

from typing import Any

import pytest

from pizzabot.agent.argforms import MAX_NESTING, validate_arguments
from pizzabot.agent.argforms.schema_shape import nesting_problem, schema_problem


def nested(levels: int, wrap: str = "properties") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        if wrap == "properties":
            schema = {"type": "object", "properties": {"a": schema}}
        elif wrap == "allOf":
            schema = {"allOf": [schema]}
        else:
            schema = {"type": "array", "items": schema}
    return {"type": "object", "properties": {"x": schema}}


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"$ref": "#"}, "a $ref cycle at /: $ref '#' leads back to it"),
        ({"$id": "urn:x", "$ref": "urn:x"}, "$ref 'urn:x' leads back"),
        (
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                "$ref": "#/$defs/a",
            },
            "$ref '#/$defs/b' → $ref '#/$defs/a'",
        ),
        ({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}}, "anyOf/0 → $ref '#/$defs/a'"),
        ({"$defs": {"a": {"$anchor": "A", "not": {"$ref": "#A"}}}}, "not → $ref '#A'"),
        (nested(300), "nested deeper than 64 levels (at /properties/x/properties/a/"),
        (nested(300, "allOf"), "nested deeper than 64 levels (at /properties/x/allOf/0/"),
    ],
)
def test_a_schema_without_end_is_named_with_where(schema: dict[str, Any], said: str) -> None:
    problem = schema_problem(schema)
    assert problem is not None and said in problem
    errors = validate_arguments(schema, {"x": "a"})
    assert errors[""].startswith("the tool's input schema is invalid: ")
    assert said in errors[""]


@pytest.mark.parametrize(
    "schema",
    [
        {
            "$defs": {
                "n": {"type": "object", "properties": {"kids": {"items": {"$ref": "#/$defs/n"}}}}
            },
            "properties": {"root": {"$ref": "#/$defs/n"}},
        },
        {"$ref": "https://example.com/elsewhere"},  # not fetched: jsonschema says so
        {"$ref": "#/nowhere"},
        nested(20),
        nested(MAX_NESTING // 2 - 2),
    ],
)
def test_a_schema_that_ends_passes(schema: dict[str, Any]) -> None:
    assert schema_problem(schema) is None


def test_arguments_nested_too_deep_are_refused_at_their_field() -> None:
    value: Any = 1
    for _ in range(MAX_NESTING + 5):
        value = [value]
    found = nesting_problem({"fine": 1, "deep": value})
    assert found is not None
    place, message = found
    assert place == ("deep",)
    assert message.startswith(f"nested deeper than {MAX_NESTING} levels (at deep[0][0]")
    assert validate_arguments({"type": "object"}, {"deep": value}) == {"deep": message}

    shallow: Any = 1
    for _ in range(MAX_NESTING - 1):
        shallow = [shallow]
    assert nesting_problem({"ok": shallow}) is None


def test_a_recursive_schema_with_a_value_nested_too_deep_is_an_error_not_a_crash() -> None:
    tree = {
        "type": "object",
        "$defs": {"n": {"type": "object", "properties": {"k": {"$ref": "#/$defs/n"}}}},
        "properties": {"root": {"$ref": "#/$defs/n"}},
    }
    value: Any = {}
    for _ in range(500):
        value = {"k": value}
    errors = validate_arguments(tree, {"root": value})
    assert list(errors) == ["root"] and "nested deeper than" in errors["root"]
