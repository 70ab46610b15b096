"""The edit form of an action item, between `pizzabot.agent.argforms` and HTML.

`pizzabot.agent.argforms` decides what the fields are and how typed text becomes arguments, for every
channel alike. This module only adds what a web form needs on top: input names that cannot
collide with the form's own fields (``csrf``), element ids (unique even where two names differ
only in punctuation, such as a property ``a-b`` and ``b`` nested in ``a``), the value to show
(the proposed argument, or what the person typed when the form comes back with errors), the
error next to each field, and the small hints (bounds, "leave empty for none") a browser form
shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pizzabot.agent.argforms import Field, chosen, coerce_form, form_fields

__all__ = ["PREFIX", "FieldView", "field_views", "read_form", "submitted"]

#: Every argument's input is named ``arg.<field name>``, so a tool property called ``csrf``
#: cannot shadow the form's CSRF token.
PREFIX = "arg."

Raw = dict[str, str | bool | None]


@dataclass(frozen=True)
class FieldView:
    """One input as the template draws it."""

    field: Field
    input_name: str
    input_id: str
    value: str | bool | None
    error: str | None
    hints: tuple[str, ...]
    #: For a select whose current value is not one of the options (the model proposed
    #: something the schema does not allow): shown as an extra, marked choice.
    stray_option: str | None = None
    #: For a multiple choice: the options ticked.
    picked: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return self.field.kind

    @property
    def input_type(self) -> str:
        """The HTML input of a one-line text field: by its format where a browser helps
        (a date picker, a phone's email keyboard); a date-time stays text, since a browser's
        picker drops the time zone the answer needs."""
        return {"email": "email", "uri": "url", "date": "date"}.get(self.field.format or "", "text")


def field_views(
    schema: Mapping[str, Any],
    values: Mapping[str, Any] | None,
    *,
    raw: Mapping[str, str | bool | None] | None = None,
    errors: Mapping[str, str] | None = None,
) -> list[FieldView]:
    """The form for ``schema`` prefilled from ``values``, or from ``raw`` (what was submitted)
    when the form is shown again after an error."""
    views: list[FieldView] = []
    for index, field in enumerate(form_fields(schema, values or {})):
        value: str | bool | None = field.value
        if raw is not None:
            given = raw.get(field.name)
            value = bool(given) if field.kind == "checkbox" else given
        stray = None
        if field.kind == "select" and isinstance(value, str) and value:
            stray = None if value in field.options else value
        picked = chosen(replace(field, value=value)) if field.kind == "multiselect" else ()
        views.append(
            FieldView(
                field=field,
                input_name=PREFIX + field.name,
                input_id=_input_id(index, field.name),
                value=value,
                error=(errors or {}).get(field.name),
                hints=_hints(field),
                stray_option=stray,
                picked=picked,
            )
        )
    return views


def _input_id(index: int, name: str) -> str:
    # The field's position makes the id unique; the name only makes it readable, and its
    # punctuation (``.``, ``\.``, ``-``) is folded, so on its own it could collide.
    return f"arg-{index}-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


def submitted(schema: Mapping[str, Any], form: Mapping[str, Any]) -> Raw:
    """The form's argument inputs keyed by field name, as `coerce_form` reads them.

    An unchecked checkbox is absent from a submitted form; it becomes None (false). Line
    breaks come back as the ``\\n`` they were, not the ``\\r\\n`` browsers submit.
    """
    raw: Raw = {}
    for field in form_fields(schema, {}):
        value = form.get(PREFIX + field.name)
        if field.kind == "checkbox":
            raw[field.name] = "true" if value not in (None, "", "false") else None
        elif field.kind == "multiselect":
            # One input per option: the ticked ones come back under the same name.
            ticked = [v for v in _all(form, PREFIX + field.name) if isinstance(v, str)]
            raw[field.name] = json.dumps(ticked) if ticked else None
        elif isinstance(value, str):
            # Browsers send a textarea's line breaks as CRLF; the model's text had LF.
            raw[field.name] = value.replace("\r\n", "\n")
        else:
            raw[field.name] = None
    return raw


def _all(form: Mapping[str, Any], name: str) -> list[Any]:
    getlist = getattr(form, "getlist", None)
    if callable(getlist):
        return list(getlist(name))
    value = form.get(name)
    return value if isinstance(value, list) else ([] if value is None else [value])


def read_form(
    schema: Mapping[str, Any], form: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str], Raw]:
    """Arguments from a submitted edit form: (arguments, errors by field, what was typed)."""
    raw = submitted(schema, form)
    args, errors = coerce_form(schema, raw)
    return args, errors, raw


def _hints(field: Field) -> tuple[str, ...]:
    hints: list[str] = []
    if field.kind in ("number", "integer"):
        lo, hi = field.minimum, field.maximum
        if lo is not None and hi is not None:
            hints.append(f"{_num(lo)} to {_num(hi)}")
        elif lo is not None:
            hints.append(f"at least {_num(lo)}")
        elif hi is not None:
            hints.append(f"at most {_num(hi)}")
        if field.kind == "integer":
            hints.append("whole number")
    if field.min_length is not None and field.min_length > 1:
        hints.append(f"at least {field.min_length} characters")
    if field.max_length is not None:
        hints.append(f"at most {field.max_length} characters")
    if field.format:
        hints.append(field.format)
    if field.kind == "json":
        hints.append("JSON")
    if field.nullable and field.kind != "checkbox":
        hints.append("leave empty for none")
    return tuple(hints)


def _num(value: int | float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
