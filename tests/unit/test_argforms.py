"""Tool schemas as edit forms and back: the rules the web page, Slack and email share."""

from __future__ import annotations

import http.server
import threading
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic import Field as PydanticField

from pizzabot.agent.argforms import (
    Field,
    coerce_form,
    field_name,
    field_path,
    form_fields,
    validate_arguments,
)


def by_name(fields: list[Field]) -> dict[str, Field]:
    return {f.name: f for f in fields}


def obj(properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), **extra}


# --- one kind at a time -------------------------------------------------------------------


def test_string_is_text_and_long_text_is_textarea() -> None:
    schema = obj(
        {
            "title": {"type": "string", "title": "Title", "description": "Shown first"},
            "body": {"type": "string", "maxLength": 2000},
            "memo": {"type": "string", "format": "textarea"},
            "line": {"type": "string"},
            "long": {"type": "string"},
        }
    )
    fields = by_name(form_fields(schema, {"title": "Hi", "line": "one\ntwo", "long": "x" * 81}))

    assert fields["title"].kind == "text"
    assert fields["title"].label == "Title"
    assert fields["title"].description == "Shown first"
    assert fields["title"].value == "Hi"
    assert fields["body"].kind == "textarea"
    assert fields["body"].max_length == 2000
    assert fields["memo"].kind == "textarea"
    assert fields["line"].kind == "textarea"
    assert fields["long"].kind == "textarea"


def test_text_is_kept_verbatim_and_an_empty_optional_string_is_omitted() -> None:
    schema = obj({"a": {"type": "string"}, "b": {"type": "string"}})

    args, errors = coerce_form(schema, {"a": "  spaced \n", "b": ""})

    assert errors == {}
    assert args == {"a": "  spaced \n"}


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("3", 3),
        (" 7 ", 7),
        ("-2", -2),
        ("3.0", 3),
        ("1e2", 100),
        ("12345678901234567890", 12345678901234567890),
    ],
)
def test_integer_text_becomes_an_int(typed: str, expected: int) -> None:
    args, errors = coerce_form(obj({"n": {"type": "integer"}}), {"n": typed})

    assert errors == {}
    assert args == {"n": expected}
    assert type(args["n"]) is int


@pytest.mark.parametrize("typed", ["3.5", "three", "nan", "inf", "1,5"])
def test_integer_that_is_not_whole_is_refused(typed: str) -> None:
    args, errors = coerce_form(obj({"n": {"type": "integer"}}, ("n",)), {"n": typed})

    assert errors == {"n": "must be a whole number"}
    assert "n" not in args


def test_number_text_becomes_a_number() -> None:
    schema = obj({"x": {"type": "number"}, "y": {"type": "number"}, "z": {"type": "number"}})

    args, errors = coerce_form(schema, {"x": "2.5", "y": "3", "z": "-0.125"})
    _, bad = coerce_form(schema, {"x": "two", "y": "NaN"})

    assert errors == {}
    assert args == {"x": 2.5, "y": 3, "z": -0.125}
    assert bad == {"x": "must be a number", "y": "must be a number"}


@pytest.mark.parametrize(
    ("submitted", "expected"),
    [
        (True, True),
        (False, False),
        (None, False),
        ("on", True),
        ("true", True),
        ("Yes", True),
        ("1", True),
        ("off", False),
        ("no", False),
        ("FALSE", False),
        ("0", False),
        ("", False),
    ],
)
def test_boolean_is_a_checkbox_and_reads_email_words(
    submitted: str | bool | None, expected: bool
) -> None:
    schema = obj({"urgent": {"type": "boolean"}})

    args, errors = coerce_form(schema, {"urgent": submitted})

    assert form_fields(schema, {"urgent": True})[0].kind == "checkbox"
    assert form_fields(schema, {"urgent": True})[0].value is True
    assert errors == {}
    assert args == {"urgent": expected}


def test_boolean_word_that_is_not_yes_or_no_is_refused() -> None:
    _, errors = coerce_form(obj({"urgent": {"type": "boolean"}}), {"urgent": "maybe"})

    assert errors == {"urgent": "must be true or false (yes/no)"}


def test_an_unchecked_box_is_false_even_when_the_default_is_true() -> None:
    schema = obj({"notify": {"type": "boolean", "default": True}})

    assert form_fields(schema, {})[0].value is True
    assert coerce_form(schema, {}) == ({"notify": False}, {})


def test_nullable_boolean_is_a_true_false_select_that_can_be_empty() -> None:
    schema = obj({"flag": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}})

    field = form_fields(schema, {"flag": False})[0]

    assert (field.kind, field.options, field.value, field.nullable) == (
        "select",
        ("true", "false"),
        "false",
        True,
    )
    assert coerce_form(schema, {"flag": "true"}) == ({"flag": True}, {})
    assert coerce_form(schema, {"flag": "no"}) == ({"flag": False}, {})
    assert coerce_form(schema, {"flag": ""}) == ({"flag": None}, {})


def test_enum_is_a_select_and_goes_back_to_its_own_type() -> None:
    schema = obj(
        {
            "priority": {"type": "string", "enum": ["low", "normal", "high"]},
            "level": {"enum": [1, 2, 3]},
            "mode": {"const": "fast"},
        },
        ("priority",),
    )

    fields = by_name(form_fields(schema, {"priority": "high", "level": 2}))
    args, errors = coerce_form(schema, {"priority": "normal", "level": "3", "mode": "fast"})
    _, bad = coerce_form(schema, {"priority": "urgent", "level": "4"})

    assert fields["priority"].kind == "select"
    assert fields["priority"].options == ("low", "normal", "high")
    assert fields["priority"].value == "high"
    assert fields["level"].options == ("1", "2", "3")
    assert fields["level"].value == "2"
    assert fields["mode"].options == ("fast",)
    assert errors == {}
    assert args == {"priority": "normal", "level": 3, "mode": "fast"}
    assert bad == {
        "priority": "must be one of: low, normal, high",
        "level": "must be one of: 1, 2, 3",
    }


def test_enum_matches_an_option_typed_in_another_case() -> None:
    schema = obj({"priority": {"enum": ["low", "high"]}})

    assert coerce_form(schema, {"priority": " HIGH "}) == ({"priority": "high"}, {})


# --- bounds, required, formats --------------------------------------------------------------


def test_bounds_are_offered_and_enforced_in_plain_words() -> None:
    schema = obj(
        {
            "qty": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "code": {"type": "string", "minLength": 2, "maxLength": 4},
            "name": {"type": "string", "minLength": 1},
        }
    )
    field = by_name(form_fields(schema, {}))["qty"]

    _, too_big = coerce_form(schema, {"qty": "11", "ratio": "1", "code": "abcde"})
    _, too_small = coerce_form(schema, {"qty": "0", "ratio": "0", "code": "a"})
    args, fine = coerce_form(schema, {"qty": "10", "ratio": "0.5", "code": "abcd"})

    assert (field.minimum, field.maximum) == (1, 10)
    assert too_big == {
        "qty": "must be at most 10",
        "ratio": "must be less than 1",
        "code": "must be at most 4 characters",
    }
    assert too_small == {
        "qty": "must be at least 1",
        "ratio": "must be greater than 0",
        "code": "must be at least 2 characters",
    }
    assert fine == {}
    assert args == {"qty": 10, "ratio": 0.5, "code": "abcd"}
    assert validate_arguments(schema, {"name": ""}) == {"name": "must not be empty"}


def test_missing_or_empty_required_fields_are_named() -> None:
    schema = obj(
        {"to": {"type": "string"}, "count": {"type": "integer"}, "cc": {"type": "string"}},
        ("to", "count"),
    )

    args, errors = coerce_form(schema, {"count": "  ", "cc": "x@example.test"})

    assert errors == {"to": "is required", "count": "is required"}
    assert args == {"cc": "x@example.test"}
    assert [f.required for f in form_fields(schema, {})] == [True, True, False]


def test_format_is_checked() -> None:
    schema = obj({"email": {"type": "string", "format": "email"}})

    _, errors = coerce_form(schema, {"email": "not-an-address"})

    assert form_fields(schema, {})[0].format == "email"
    assert errors == {"email": "must be a valid email"}


def test_unknown_names_in_the_form_are_ignored() -> None:
    schema = obj({"a": {"type": "string"}}, additionalProperties=False)

    assert coerce_form(schema, {"a": "x", "csrf_token": "t", "b": "y"}) == ({"a": "x"}, {})


# --- nullable, JSON, nested -----------------------------------------------------------------


def test_anyof_with_null_is_optional_and_empty_means_null() -> None:
    schema = obj(
        {
            "note": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "title": "Note",
            },
            "limit": {"type": ["integer", "null"], "maximum": 5},
        },
        ("limit",),
    )

    fields = by_name(form_fields(schema, {"note": None, "limit": 3}))
    empty, no_errors = coerce_form(schema, {"note": "", "limit": ""})
    _, errors = coerce_form(schema, {"note": "hi", "limit": "6"})

    assert (fields["note"].kind, fields["note"].nullable, fields["note"].value) == (
        "text",
        True,
        None,
    )
    assert fields["note"].label == "Note"
    assert (fields["limit"].kind, fields["limit"].value) == ("integer", "3")
    assert no_errors == {}
    assert empty == {"note": None, "limit": None}
    # The reason X failed, not "is not valid under any of the given schemas".
    assert errors == {"limit": "must be at most 5"}


def test_arrays_and_objects_are_json_fields() -> None:
    schema = obj(
        {
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
            "free": {"type": "object"},
        }
    )

    fields = by_name(form_fields(schema, {"tags": ["a", "b"], "meta": {"x": 1}}))
    args, errors = coerce_form(schema, {"tags": '["c"]', "meta": '{"y": 2}', "free": '{"k": [1]}'})
    _, bad = coerce_form(schema, {"tags": "[1, 2]", "meta": '{"y": "two"}'})

    assert {f.kind for f in fields.values()} == {"json"}
    assert fields["tags"].value == '[\n  "a",\n  "b"\n]'
    assert fields["free"].value is None
    assert errors == {}
    assert args == {"tags": ["c"], "meta": {"y": 2}, "free": {"k": [1]}}
    assert bad == {"tags": "[0]: must be text", "meta": "y: must be a whole number"}


def test_invalid_json_says_where() -> None:
    schema = obj({"tags": {"type": "array"}})

    args, errors = coerce_form(schema, {"tags": '["a" "b"]'})

    assert args == {}
    assert errors == {"tags": "invalid JSON: Expecting ',' delimiter (line 1 column 6)"}


def test_unknown_types_and_real_unions_are_json_fields() -> None:
    schema = obj(
        {
            "odd": {"type": ["string", "integer"]},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "untyped": {},
        }
    )

    fields = by_name(form_fields(schema, {"either": "x"}))
    args, errors = coerce_form(schema, {"either": "5", "untyped": '"s"'})

    assert [f.kind for f in fields.values()] == ["json", "json", "json"]
    assert fields["either"].value == '"x"'
    assert errors == {}
    assert args == {"either": 5, "untyped": "s"}


def test_nested_objects_become_dotted_fields() -> None:
    address = obj(
        {"city": {"type": "string", "title": "City"}, "zip": {"type": "string"}}, ("city",)
    )
    schema = obj(
        {
            "address": {**address, "title": "Address"},
            "billing": address,
            "backup": {"anyOf": [address, {"type": "null"}]},
        },
        ("address",),
    )

    fields = by_name(form_fields(schema, {"address": {"city": "Rome"}}))
    args, errors = coerce_form(
        schema, {"address.city": "Oslo", "address.zip": "", "billing.city": "", "backup.city": ""}
    )
    _, partial = coerce_form(schema, {"address.city": "", "billing.zip": "123", "backup.zip": "9"})

    assert list(fields) == [
        "address.city",
        "address.zip",
        "billing.city",
        "billing.zip",
        "backup.city",
        "backup.zip",
    ]
    assert fields["address.city"].value == "Rome"
    assert fields["address.city"].label == "Address › City"
    assert fields["address.city"].required is True
    # Required inside an optional object: a form cannot insist on it.
    assert fields["billing.city"].required is False
    assert errors == {}
    # An optional object left empty is omitted; a nullable one is null.
    assert args == {"address": {"city": "Oslo"}, "backup": None}
    assert partial == {
        "address.city": "is required",
        "billing.city": "is required",
        "backup.city": "is required",
    }


DOTTED = obj(
    {
        "address.city": {"type": "string"},
        "address": obj({"city": {"type": "string"}}, ("city",)),
        "a\\": obj({"b": {"type": "string"}}),
        "a\\.b": {"type": "string"},
    },
    ("address",),
)


def test_a_dot_in_a_property_name_is_escaped_so_it_is_not_a_nested_field() -> None:
    fields = by_name(form_fields(DOTTED, {"address.city": "Lyon", "address": {"city": "Paris"}}))

    assert list(fields) == ["address\\.city", "address.city", "a\\\\.b", "a\\\\\\.b"]
    assert fields["address\\.city"].value == "Lyon"
    assert fields["address\\.city"].label == "address.city"
    assert fields["address.city"].value == "Paris"
    assert fields["address.city"].label == "address › city"


def test_a_dotted_property_and_a_nested_one_are_set_apart() -> None:
    raw = {"address\\.city": "Nice", "address.city": "Brest", "a\\\\.b": "1", "a\\\\\\.b": "2"}

    args, errors = coerce_form(DOTTED, raw)
    _, missing = coerce_form(DOTTED, {"address\\.city": "Nice"})

    assert errors == {}
    assert args == {
        "address.city": "Nice",
        "address": {"city": "Brest"},
        "a\\": {"b": "1"},
        "a\\.b": "2",
    }
    assert missing == {"address.city": "is required"}  # the nested one, by its own name


def test_errors_name_a_dotted_property_as_a_form_does() -> None:
    errors = validate_arguments(DOTTED, {"address.city": 5, "address": {"city": "Paris", "x.y": 1}})

    assert errors["address\\.city"] == "must be text"
    assert errors["address.x\\.y"] == "unknown field; the fields of address are: city"


@given(st.lists(st.text(alphabet="ab.\\", max_size=6), min_size=1, max_size=4))
def test_a_field_name_reads_back_as_its_path(path: list[str]) -> None:
    assert field_path(field_name(path)) == tuple(path)


def test_only_what_would_read_as_an_escape_is_escaped() -> None:
    assert field_name(["address", "city"]) == "address.city"
    assert field_name(["C:\\temp", "x"]) == "C:\\temp.x"  # a backslash before a letter stays
    assert field_path("C:\\temp.x") == ("C:\\temp", "x")


def test_an_absent_optional_object_is_not_created_by_its_members_defaults() -> None:
    inner = obj(
        {"city": {"type": "string"}, "country": {"type": "string", "default": "IT"}}, ("city",)
    )
    schema = obj({"ship_to": inner, "home": inner}, ("home",))

    fields = by_name(form_fields(schema, {}))
    args, errors = coerce_form(
        schema, {f.name: f.value for f in fields.values()} | {"home.city": "Rome"}
    )

    assert fields["ship_to.country"].value is None
    assert fields["home.country"].value == "IT"
    assert errors == {}
    assert args == {"home": {"city": "Rome", "country": "IT"}}


def test_local_refs_are_resolved() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "Priority": {"type": "string", "enum": ["low", "high"], "title": "Priority"},
            "Point": obj({"x": {"type": "integer"}, "y": {"type": "integer"}}, ("x", "y")),
        },
        "definitions": {"Name": {"type": "string", "maxLength": 3}},
        "properties": {
            "fallback": {"$ref": "#/$defs/Priority", "description": "If the first fails"},
            "at": {"$ref": "#/$defs/Point"},
            "who": {"$ref": "#/definitions/Name"},
            "also": {"allOf": [{"$ref": "#/$defs/Priority"}]},
        },
        "required": ["at"],
    }

    fields = by_name(form_fields(schema, {"at": {"x": 1, "y": 2}}))
    args, errors = coerce_form(
        schema, {"fallback": "high", "at.x": "3", "at.y": "4", "who": "Bob", "also": "low"}
    )
    _, bad = coerce_form(schema, {"at.x": "3", "at.y": "", "who": "Bobby"})

    assert fields["fallback"].kind == "select"
    assert fields["fallback"].label == "fallback"  # not the shared definition's title
    assert fields["fallback"].description == "If the first fails"
    assert (fields["at.x"].value, fields["at.y"].value) == ("1", "2")
    assert fields["who"].max_length == 3
    assert fields["also"].options == ("low", "high")
    assert errors == {}
    assert args == {"fallback": "high", "at": {"x": 3, "y": 4}, "who": "Bob", "also": "low"}
    assert bad == {"at.y": "is required", "who": "must be at most 3 characters"}


def test_recursive_refs_fall_back_to_json() -> None:
    schema = {
        "$defs": {"Node": obj({"name": {"type": "string"}, "child": {"$ref": "#/$defs/Node"}})},
        **obj({"tree": {"$ref": "#/$defs/Node"}}),
    }

    fields = by_name(form_fields(schema, {"tree": {"name": "a", "child": {"name": "b"}}}))

    assert fields["tree.name"].value == "a"
    assert fields["tree.child"].kind == "json"
    assert coerce_form(schema, {"tree.name": "a", "tree.child": '{"name": 5}'}) == (
        {"tree": {"name": "a", "child": {"name": 5}}},
        {"tree.child": "name: must be text"},
    )


def test_defaults_and_titles_prefill_the_form() -> None:
    schema = obj(
        {
            "size": {"type": "string", "enum": ["s", "m"], "default": "m", "title": "Pizza size"},
            "qty": {"type": "integer", "default": 2},
            "extra": {"type": "array", "default": ["basil"]},
        }
    )

    fields = by_name(form_fields(schema, {"qty": 5}))

    assert (fields["size"].label, fields["size"].value) == ("Pizza size", "m")
    assert fields["qty"].value == "5"  # a given value beats the default
    assert fields["extra"].value == '[\n  "basil"\n]'


def test_additional_properties_false_rejects_extra_arguments() -> None:
    schema = obj({"a": {"type": "string"}}, additionalProperties=False)

    assert validate_arguments(schema, {"a": "x", "b": 1, "c": 2}) == {
        "b": "unknown field; the fields of this tool are: a",
        "c": "unknown field; the fields of this tool are: a",
    }
    assert validate_arguments(schema, {"a": "x"}) == {}


def test_schema_without_properties_is_edited_as_one_json_object() -> None:
    schema = {"type": "object"}

    fields = form_fields(schema, {"q": "pizza"})

    assert [(f.name, f.kind, f.value) for f in fields] == [
        ("arguments", "json", '{\n  "q": "pizza"\n}')
    ]
    assert coerce_form(schema, {"arguments": '{"q": "pasta"}'}) == ({"q": "pasta"}, {})
    assert coerce_form(schema, {"arguments": ""}) == ({}, {})
    assert coerce_form(schema, {"arguments": "[1]"}) == ({}, {"arguments": "must be an object"})


def test_validate_arguments_names_nested_fields_and_items() -> None:
    schema = obj(
        {
            "to": obj({"email": {"type": "string", "format": "email"}}, ("email",)),
            "items": {"type": "array", "items": obj({"sku": {"type": "string"}}, ("sku",))},
            "n": {"type": "integer"},
        },
        ("to",),
    )

    errors = validate_arguments(schema, {"to": {"email": "nope"}, "items": [{}], "n": "3"})

    assert errors == {
        "to.email": "must be a valid email",
        "items": "[0].sku: is required",
        "n": "must be a whole number",
    }
    # An object missing as a whole is no one field: the form builds it, so JSON edits see this.
    assert validate_arguments(schema, {}) == {"": "to: is required"}


def test_remote_refs_are_never_fetched() -> None:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/name.json"
        schema = obj({"name": {"$ref": url}})

        field = form_fields(schema, {"name": "x"})[0]
        errors = validate_arguments(schema, {"name": "x"})
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

    assert field.kind == "json"
    assert hits == []
    assert list(errors) == [""]
    assert "refers to something unavailable" in errors[""]


def test_an_invalid_schema_is_reported_not_raised() -> None:
    errors = validate_arguments({"type": "object", "properties": {"a": {"type": 5}}}, {"a": 1})

    assert list(errors) == [""]
    assert errors[""].startswith("the tool's input schema is invalid")


# --- round trips and real schemas -------------------------------------------------------------


ROUND_TRIP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"Size": {"enum": ["small", "large"], "type": "string"}},
    "properties": {
        "text": {"type": "string"},
        "long": {"type": "string", "maxLength": 5000},
        "count": {"type": "integer"},
        "price": {"type": "number"},
        "ok": {"type": "boolean"},
        "size": {"$ref": "#/$defs/Size"},
        "level": {"enum": [1, 2]},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "tri": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "additionalProperties": True},
        "where": obj(
            {"city": {"type": "string"}, "floor": {"type": "integer"}, "lift": {"type": "boolean"}},
            ("city",),
        ),
    },
    "required": ["text", "count", "where"],
}


@pytest.mark.parametrize(
    "args",
    [
        {
            "text": "Margherita ×2",
            "long": "line one\nline two",
            "count": 3,
            "price": 12.5,
            "ok": True,
            "size": "large",
            "level": 2,
            "maybe": 7,
            "tri": False,
            "tags": ["a", "b"],
            "meta": {"nested": {"deep": [1, None]}},
            "where": {"city": "Naples", "floor": -1, "lift": False},
        },
        {
            "text": "-",
            "long": " ",
            "count": 0,
            "price": 0.1,
            "ok": False,
            "size": "small",
            "level": 1,
            "maybe": None,
            "tri": None,
            "tags": [],
            "meta": {},
            "where": {"city": "Rome", "floor": 0, "lift": True},
        },
    ],
)
def test_round_trip_gives_back_the_original_arguments(args: dict[str, Any]) -> None:
    schema = ROUND_TRIP_SCHEMA
    values = {f.name: f.value for f in form_fields(schema, args)}

    assert validate_arguments(schema, args) == {}
    assert coerce_form(schema, values) == (args, {})


class Address(BaseModel):
    street: str
    city: str = PydanticField(description="City or town")
    floor: int | None = None


class PizzaOrder(BaseModel):
    size: Literal["small", "medium", "large"] = "medium"
    quantity: Annotated[int, PydanticField(ge=1, le=10)]
    priority: Literal["low", "normal", "high"] | None = None
    note: str | None = None
    toppings: list[str] = []
    deliver_to: Address
    gift_wrap: bool = False


def test_pydantic_generated_schema_works() -> None:
    schema = PizzaOrder.model_json_schema()
    assert "$defs" in schema  # the nested model really is a $ref

    fields = by_name(form_fields(schema, {"quantity": 2, "deliver_to": {"street": "Via Roma 1"}}))
    args, errors = coerce_form(
        schema,
        {
            "size": "large",
            "quantity": "4",
            "priority": "high",
            "note": "",
            "toppings": '["basil", "olives"]',
            "deliver_to.street": "Via Roma 1",
            "deliver_to.city": "Naples",
            "deliver_to.floor": "",
            "gift_wrap": "on",
        },
    )
    _, bad = coerce_form(
        schema,
        {"size": "huge", "quantity": "11", "priority": "asap", "deliver_to.street": "x"},
    )

    assert fields["size"].options == ("small", "medium", "large")
    assert fields["size"].value == "medium"
    assert (fields["quantity"].minimum, fields["quantity"].maximum) == (1, 10)
    assert (fields["priority"].kind, fields["priority"].nullable) == ("select", True)
    assert fields["deliver_to.city"].description == "City or town"
    assert fields["deliver_to.city"].required is True
    assert fields["deliver_to.floor"].kind == "integer"
    assert fields["gift_wrap"].kind == "checkbox"
    assert errors == {}
    assert PizzaOrder.model_validate(args).model_dump() == args
    assert args["deliver_to"] == {"street": "Via Roma 1", "city": "Naples", "floor": None}
    assert bad == {
        "size": "must be one of: small, medium, large",
        "quantity": "must be at most 10",
        "priority": "must be one of: low, normal, high",
        "deliver_to.city": "is required",
    }


async def test_an_mcp_servers_tool_schema_works() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("pizzeria")

    @server.tool()
    def order_pizza(
        size: Literal["small", "large"],
        quantity: Annotated[int, PydanticField(ge=1, le=10)],
        deliver_to: Address,
        note: str | None = None,
    ) -> str:
        """Order a pizza."""
        return "ordered"

    (tool,) = await server.list_tools()
    schema = tool.input_schema

    values = {f.name: f.value for f in form_fields(schema, {})}
    values |= {"size": "small", "quantity": "2", "deliver_to.street": "A 1", "deliver_to.city": "B"}
    args, errors = coerce_form(schema, values)

    assert errors == {}
    assert args == {
        "size": "small",
        "quantity": 2,
        "deliver_to": {"street": "A 1", "city": "B", "floor": None},
        "note": None,
    }
    assert coerce_form(schema, values | {"quantity": "0"})[1] == {"quantity": "must be at least 1"}


# --- bounds and undeclared fields --------------------------------------------------------


@pytest.mark.parametrize("typed", ["1e500000", "1e1000000", "-1e100", "9" * 101])
def test_a_whole_number_past_its_digit_limit_is_a_field_error(typed: str) -> None:
    schema = obj({"copies": {"type": "integer"}})

    args, errors = coerce_form(schema, {"copies": typed})

    assert errors == {"copies": "is out of range: a whole number has at most 100 digits"}
    assert "copies" not in args


def test_a_whole_number_within_its_digit_limit_is_kept_exactly() -> None:
    schema = obj({"id": {"type": "integer"}})

    assert coerce_form(schema, {"id": "9" * 100}) == ({"id": int("9" * 100)}, {})
    assert coerce_form(schema, {"id": "1e99"}) == ({"id": 10**99}, {})


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("1e309", "is out of range: must be a finite number"),
        ("1e500000", "is out of range: must be a finite number"),
        ("1e-500000", "is too small: use 0"),
        ("1" * 201, "is too long for a number (at most 200 characters)"),
    ],
)
def test_a_number_a_double_cannot_hold_is_a_field_error(typed: str, message: str) -> None:
    schema = obj({"price": {"type": "number"}})

    assert coerce_form(schema, {"price": typed}) == ({}, {"price": message})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"n": 1e500}', "a number is out of range: must be a finite number"),
        ('{"n": NaN}', "NaN is not a number JSON allows"),
        ('{"n": -Infinity}', "-Infinity is not a number JSON allows"),
        ('{"n": ' + "7" * 5000 + "}", "a number is out of range: a whole number has at most"),
    ],
)
def test_a_json_field_refuses_numbers_out_of_range(text: str, message: str) -> None:
    schema = obj({"extra": {"type": "object", "additionalProperties": True}})

    args, errors = coerce_form(schema, {"extra": text})

    assert errors["extra"].startswith(message)
    assert "extra" not in args


def test_arguments_from_json_with_numbers_out_of_range_are_field_errors() -> None:
    schema = obj({"copies": {"type": "integer"}, "scale": {"type": "number"}, "tags": {}})

    errors = validate_arguments(
        schema, {"copies": 10**5000, "scale": float("inf"), "tags": [1, float("nan")]}
    )

    assert errors == {
        "copies": "is out of range: a whole number has at most 100 digits",
        "scale": "is out of range: must be a finite number",
        "tags": "[1]: is out of range: must be a finite number",
    }


def test_an_undeclared_field_is_refused_with_the_known_ones() -> None:
    schema = obj({"copies": {"type": "integer"}, "to": {"type": "string"}})

    assert validate_arguments(schema, {"copies": 1, "copy": 3}) == {
        "copy": "unknown field; the fields of this tool are: copies, to"
    }


def test_an_undeclared_field_of_a_nested_object_is_refused() -> None:
    class Address(BaseModel):
        city: str

    class Order(BaseModel):
        address: Address
        lines: list[Address]

    schema = Order.model_json_schema()

    errors = validate_arguments(
        schema, {"address": {"city": "Oslo", "zip": "0150"}, "lines": [{"city": "a", "x": 1}]}
    )

    assert errors == {
        "address.zip": "unknown field; the fields of address are: city",
        "lines": "[0].x: unknown field; the fields of lines[0] are: city",
    }


@pytest.mark.parametrize(
    "schema",
    [
        obj({"a": {"type": "integer"}}, additionalProperties=True),
        obj({"a": {"type": "integer"}}, additionalProperties={"type": "integer"}),
        obj({"a": {"type": "integer"}}, patternProperties={"^x-": {"type": "integer"}}),
        {"type": "object"},
        {"allOf": [obj({"a": {"type": "integer"}}), obj({"b": {"type": "integer"}})]},
        {"anyOf": [obj({"a": {"type": "integer"}}), obj({"x-b": {"type": "integer"}})]},
    ],
)
def test_fields_the_schema_allows_are_accepted(schema: dict[str, Any]) -> None:
    args = {"a": 1, "x-b": 2} if "allOf" not in schema else {"a": 1, "b": 2}

    assert validate_arguments(schema, args) == {}


def test_a_schema_for_extra_fields_checks_their_members_too() -> None:
    schema = obj({}, additionalProperties=obj({"n": {"type": "integer"}}))

    assert validate_arguments(schema, {"k": {"n": 1, "m": 2}}) == {
        "k.m": "unknown field; the fields of k are: n"
    }


def test_a_tool_without_arguments_takes_no_fields() -> None:
    assert validate_arguments(obj({}), {"force": True}) == {
        "force": "unknown field: this tool has no fields"
    }


def test_each_schema_checks_by_its_own_terms_when_checked_in_turn() -> None:
    small = obj({"n": {"type": "integer", "maximum": 5}}, required=("n",))
    large = obj({"n": {"type": "integer", "maximum": 500}}, required=("n",))

    for _ in range(2):  # the second pass reuses what the first made of each schema
        assert validate_arguments(small, {"n": 50}) == {"n": "must be at most 5"}
        assert validate_arguments(large, {"n": 50}) == {}
        assert validate_arguments(large, {}) == {"n": "is required"}
