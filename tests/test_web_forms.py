"""The web edit form: a tool's JSON schema as HTML inputs, and a posted form as arguments.

`pizzabot.agent.argforms` has its own tests for which fields a schema yields and how text is coerced;
these check the HTML and request side: input types, names, prefill, required marks, hints,
errors next to fields, what a browser really posts (absent checkboxes, CRLF line breaks), and
the whole round trip through the item page of an in-process app.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pizzabot.agent.model import ItemStatus
from pizzabot.channels.web._render import render_fields
from pizzabot.channels.web.forms import PREFIX, field_views, read_form
from tests.peers.web import Form, WebApp, csrf_of

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "title": "To", "description": "Recipient's address."},
        "body": {"type": "string", "maxLength": 5000},
        "copies": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
        "ratio": {"type": "number", "exclusiveMinimum": 0},
        "receipt": {"type": "boolean", "default": False},
        "priority": {"enum": ["low", "normal", "high"], "default": "normal"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "address": {
            "type": "object",
            "title": "Address",
            "properties": {
                "city": {"type": "string", "title": "City"},
                "zip": {"type": "string"},
            },
            "required": ["city"],
        },
        "cc": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "urgent": {"anyOf": [{"type": "boolean"}, {"type": "null"}], "default": None},
        "level": {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]},
    },
    "required": ["to", "address"],
}

ARGS = {
    "to": "ann@example.com",
    "body": "Hello\nAnn",
    "copies": 2,
    "ratio": 0.5,
    "receipt": True,
    "priority": "high",
    "tags": ["a", "b"],
    "meta": {"k": "v"},
    "address": {"city": "Oslo"},
    "cc": None,
}


def controls(schema: dict[str, Any], args: dict[str, Any], **kw: Any) -> Form:
    return Form(render_fields(field_views(schema, args, **kw)))


def test_every_schema_type_gets_its_own_input() -> None:
    form = controls(SCHEMA, ARGS)
    c = form.controls
    assert c["arg.to"]["tag"] == "input" and c["arg.to"]["type"] == "text"
    assert c["arg.body"]["tag"] == "textarea" and c["arg.body"]["text"] == "Hello\nAnn"
    assert c["arg.copies"]["type"] == "number" and c["arg.copies"]["step"] == "1"
    assert (c["arg.copies"]["min"], c["arg.copies"]["max"]) == ("1", "10")
    assert c["arg.ratio"]["type"] == "number" and c["arg.ratio"]["step"] == "any"
    assert c["arg.receipt"]["type"] == "checkbox" and "checked" in c["arg.receipt"]
    assert c["arg.priority"]["tag"] == "select"
    assert [o["value"] for o in c["arg.priority"]["options"]] == ["", "low", "normal", "high"]
    assert c["arg.priority"]["selected"] == "high"
    # Lists and free-form objects are edited as JSON in a monospace textarea.
    for name, value in (("arg.tags", '["a","b"]'), ("arg.meta", '{"k":"v"}')):
        assert c[name]["tag"] == "textarea" and c[name]["class"] == "code"
        assert "".join(c[name]["text"].split()) == value


def test_values_are_prefilled_and_defaults_fill_the_gaps() -> None:
    c = controls(SCHEMA, {"to": "bob@example.com", "address": {"city": "Bergen"}}).controls
    assert c["arg.to"]["value"] == "bob@example.com"
    assert c["arg.copies"]["value"] == "1"  # the schema's default
    assert "checked" not in c["arg.receipt"]
    assert c["arg.priority"]["selected"] == "normal"
    assert c["arg.address.city"]["value"] == "Bergen"


def test_nested_objects_become_dotted_fields_with_their_path_in_the_label() -> None:
    form = controls(SCHEMA, ARGS)
    assert form.controls["arg.address.city"]["value"] == "Oslo"
    assert form.controls["arg.address.zip"]["value"] == ""
    assert form.label_of("arg.address.city").startswith("Address › City")
    assert "*" in form.label_of("arg.address.city")  # required all the way up
    assert "*" not in form.label_of("arg.address.zip")


def test_names_that_differ_only_in_punctuation_get_their_own_input_and_label() -> None:
    # "a-b", "b" inside "a", and a property whose own name is "a.b": one slug, three fields.
    schema = {
        "type": "object",
        "properties": {
            "a-b": {"type": "string", "title": "Dash"},
            "a": {"type": "object", "properties": {"b": {"type": "string", "title": "Nested"}}},
            "a.b": {"type": "string", "title": "Dotted"},
        },
    }
    form = controls(schema, {"a-b": "1", "a": {"b": "2"}, "a.b": "3"})
    names = ["arg.a-b", "arg.a.b", "arg.a\\.b"]
    ids = [form.controls[name]["id"] for name in names]
    assert len(set(ids)) == 3
    assert [form.controls[name]["value"] for name in names] == ["1", "2", "3"]
    labels = [form.label_of(name) for name in names]
    assert ["Dash" in labels[0], "Nested" in labels[1], "Dotted" in labels[2]] == [True] * 3
    # Every label points at exactly one input.
    assert sorted(form.labels) == sorted(ids)


def test_required_fields_are_marked_and_descriptions_and_hints_shown() -> None:
    html = render_fields(field_views(SCHEMA, ARGS))
    form = Form(html)
    assert "*" in form.label_of("arg.to") and "required" in form.controls["arg.to"]
    assert "*" not in form.label_of("arg.copies") and "required" not in form.controls["arg.copies"]
    assert "Recipient&#39;s address." in html
    assert "1 to 10 · whole number" in html
    assert "at most 5000 characters" in html


def test_any_of_with_null_can_be_left_empty() -> None:
    c = controls(SCHEMA, ARGS).controls
    assert c["arg.cc"]["type"] == "text" and c["arg.cc"]["value"] == ""
    # A checkbox cannot say "no value", so a nullable boolean is a select with a "none" choice.
    assert c["arg.urgent"]["tag"] == "select"
    assert [o["value"] for o in c["arg.urgent"]["options"]] == ["", "true", "false"]
    assert c["arg.urgent"]["selected"] == ""
    assert [o["value"] for o in c["arg.level"]["options"]] == ["", "a", "b"]
    assert c["arg.level"]["options"][0]["text"] == "(none)"
    html = render_fields(field_views(SCHEMA, ARGS))
    assert html.count("leave empty for none") == 3


def test_a_proposed_value_outside_the_enum_is_shown_not_hidden() -> None:
    c = controls(SCHEMA, {**ARGS, "priority": "urgent"}).controls
    assert c["arg.priority"]["selected"] == "urgent"
    assert c["arg.priority"]["options"][1]["text"] == "urgent (not allowed)"


def test_a_schema_without_properties_is_one_json_field() -> None:
    c = controls({"type": "object"}, {"anything": [1, 2]}).controls
    assert list(c) == ["arg.arguments"]
    assert c["arg.arguments"]["class"] == "code"


def test_everything_is_escaped() -> None:
    evil = '"><script>alert(1)</script>'
    schema = {
        "type": "object",
        "properties": {"x": {"type": "string", "title": evil, "description": evil}},
    }
    html = render_fields(field_views(schema, {"x": evil}))
    assert "<script>" not in html
    assert Form(html).controls["arg.x"]["value"] == evil  # shown back exactly, as text


def test_a_posted_form_becomes_typed_arguments() -> None:
    posted = {
        "csrf": "t",
        PREFIX + "to": "ann@example.com",
        PREFIX + "body": "Hello\r\nAnn",  # browsers send textarea line breaks as CRLF
        PREFIX + "copies": "3",
        PREFIX + "ratio": "0.25",
        PREFIX + "priority": "low",
        PREFIX + "tags": '["x"]',
        PREFIX + "meta": "",
        PREFIX + "address.city": "Oslo",
        PREFIX + "address.zip": "",
        PREFIX + "cc": "",
        PREFIX + "urgent": "true",
        PREFIX + "level": "",
        # receipt is unchecked: a browser does not send it at all
    }
    args, errors, _ = read_form(SCHEMA, posted)
    assert errors == {}
    assert args == {
        "to": "ann@example.com",
        "body": "Hello\nAnn",
        "copies": 3,
        "ratio": 0.25,
        "receipt": False,
        "priority": "low",
        "tags": ["x"],
        "address": {"city": "Oslo"},
        "cc": None,
        "urgent": True,
        "level": None,
    }
    args, errors, _ = read_form(SCHEMA, {**posted, PREFIX + "receipt": "true"})
    assert errors == {} and args["receipt"] is True


def test_a_tool_argument_named_csrf_does_not_collide_with_the_form_token() -> None:
    schema = {"type": "object", "properties": {"csrf": {"type": "string"}}, "required": ["csrf"]}
    args, errors, _ = read_form(schema, {"csrf": "form-token", PREFIX + "csrf": "tool value"})
    assert errors == {} and args == {"csrf": "tool value"}


def test_errors_are_keyed_by_field_and_the_typed_input_comes_back() -> None:
    posted = {
        PREFIX + "to": "",
        PREFIX + "copies": "50",
        PREFIX + "ratio": "abc",
        PREFIX + "priority": "high",
        PREFIX + "tags": "[1,",
        PREFIX + "address.city": "",
    }
    _, errors, raw = read_form(SCHEMA, posted)
    assert set(errors) == {"to", "copies", "ratio", "tags", "address.city"}
    form = controls(SCHEMA, ARGS, raw=raw, errors=errors)
    assert form.controls["arg.copies"]["value"] == "50"
    assert form.controls["arg.ratio"]["value"] == "abc"
    assert form.controls["arg.priority"]["selected"] == "high"
    assert form.controls["arg.tags"]["text"] == "[1,"
    assert form.controls["arg.copies"]["aria-invalid"] == "true"
    assert "arg.to" in form.controls and "aria-invalid" not in form.controls["arg.body"]
    assert any("at most 10" in e for e in form.errors)
    assert any("is required" in e for e in form.errors)
    assert any("invalid JSON" in e for e in form.errors)


async def test_the_item_page_edits_round_trip(tmp_path: Path) -> None:
    async with WebApp(tmp_path) as web:
        item = await web.action_item(schema=SCHEMA, args=ARGS)
        async with web.client(logged_in=True) as c:
            page = await c.get(f"/items/{item.id}")
            assert page.status_code == 200
            form = Form(page.text)
            assert form.controls["arg.copies"]["value"] == "2"
            posted = {
                "csrf": csrf_of(page.text),
                "decision": "edit",
                **{
                    name: control.get("value", control.get("text", ""))
                    for name, control in form.controls.items()
                    if name.startswith(PREFIX) and control["tag"] != "select"
                },
                PREFIX + "priority": "high",
                PREFIX + "receipt": "true",
                PREFIX + "urgent": "",
                PREFIX + "level": "",
            }
            action = edit_action(page.text)
            bad = await c.post(action, data={**posted, PREFIX + "copies": "0"})
            assert bad.status_code == 422
            # The refusal is the page at the item's own address: what the browser shows then
            # is what a reload (it sends the form again) or a visit to that address shows.
            assert bad.url.path == f"/items/{item.id}"
            again = Form(bad.text)
            assert again.controls["arg.copies"]["value"] == "0"
            assert again.controls["arg.priority"]["selected"] == "high"
            assert any("at least 1" in e for e in again.errors)
            assert edit_action(bad.text) == action  # fix and send again from there
            assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING
            visit = await c.get(bad.url.path)
            assert visit.status_code == 200
            assert Form(visit.text).controls["arg.copies"]["value"] == "2"

            ok = await c.post(action, data={**posted, PREFIX + "copies": "7"})
            assert ok.status_code == 303
            assert ok.headers["location"] == f"/items/{item.id}?flash=edited"
        decided = await web.store.get_item(item.id)
        assert decided.status is ItemStatus.EDITED
        assert decided.decided_by == "owner" and decided.decided_via == "web"
        assert decided.final_args is not None
        assert decided.final_args["copies"] == 7 and decided.final_args["body"] == "Hello\nAnn"
        assert decided.final_args["tags"] == ["a", "b"]


def edit_action(html: str) -> str:
    """Where the page's edit form posts to (without the fragment)."""
    match = re.search(r'<form class="edit-form" method="post" action="([^"#]*)', html)
    assert match, "no edit form on the page"
    return match.group(1)


async def test_a_decision_names_itself_and_an_unknown_one_decides_nothing(tmp_path: Path) -> None:
    async with WebApp(tmp_path) as web:
        item = await web.action_item(schema=SCHEMA, args=ARGS)
        async with web.client(logged_in=True) as c:
            csrf = csrf_of((await c.get(f"/items/{item.id}")).text)
            for bogus in ({}, {"decision": "approve please"}):
                r = await c.post(f"/items/{item.id}", data={"csrf": csrf, **bogus})
                assert r.status_code == 400 and "Unknown decision" in r.text
            assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING
            forged = await c.post(f"/items/{item.id}", data={"decision": "approve"})
            assert forged.status_code == 403  # no CSRF token, no decision
            r = await c.post(f"/items/{item.id}", data={"csrf": csrf, "decision": "approve"})
            assert r.status_code == 303
            assert r.headers["location"] == f"/items/{item.id}?flash=approved"
        assert (await web.store.get_item(item.id)).status is ItemStatus.APPROVED
