"""Edit forms on chat platforms: the fields of an item's form (`pizzabot.agent.argforms`, the very
translation the web page, Slack and email use), what a person typed back merged into them,
and the errors in words.

A platform's form holds few inputs (a Discord modal five, a Teams dialog more, Telegram none:
a reply names the fields it changes as `name: value` lines). What a platform cannot hold is
left to the item's web page; what comes back is checked here the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pizzabot.agent.argforms import Field, coerce_form, field_path, form_fields, validate_arguments
from pizzabot.agent.model import Item, ItemKind
from pizzabot.agent.questions import validate_answer

__all__ = ["edit_fields", "edited_args", "errors_text", "parse_lines", "prompt_text"]


def edit_fields(item: Item) -> list[Field]:
    """The item's edit form (an answer's form for a question), prefilled with the proposal."""
    return form_fields(item.schema or {}, item.args or {})


def edited_args(
    item: Item, changed: Mapping[str, str | bool | None], *, whole: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    """The arguments a person's form gives, and errors by field name (empty: they may run).

    `whole`: `changed` is the whole form as it was submitted (a modal, a dialog); else it
    holds only the fields the person named (a reply), merged into the proposal, and the
    form's defaults for what the proposal left out stay out unless named."""
    schema = item.schema or {}
    fields = edit_fields(item)
    raw: dict[str, str | bool | None] = {} if whole else {f.name: f.value for f in fields}
    known = {f.name: f for f in fields}
    errors: dict[str, str] = {}
    touched: set[str] = set()
    for name, value in changed.items():
        if name not in known:
            errors[name] = "no such field; the fields are " + ", ".join(known)
            continue
        raw[name] = value
        touched.add(field_path(name)[0])
    args, more = coerce_form(schema, raw)
    if not whole:
        # What the person did not name stays as proposed, value for value (a form cannot
        # always show it back: a model's 1e999); the whole is then checked as it would run.
        kept = {k: v for k, v in (item.args or {}).items() if k not in touched}
        args = {**kept, **{k: v for k, v in args.items() if k in touched}}
        more = {n: m for n, m in more.items() if n and field_path(n)[0] in touched}
        more |= validate_arguments(schema, args)
    for name, message in more.items():
        errors.setdefault(name, message)
    if not errors and item.kind is ItemKind.QUESTION:
        errors = validate_answer(schema, args)  # an answer's formats too, on their fields
    return args, errors


def parse_lines(text: str, fields: Sequence[Field]) -> tuple[dict[str, str], list[str]]:
    """The fields a reply names, as `name: value` lines (a line that names no field goes on
    the value before it); for a form of one field, the whole reply is its value. Returns the
    values and the lines that name no field before any did."""
    if len(fields) == 1 and not text.lstrip().lower().startswith(fields[0].name.lower() + ":"):
        return {fields[0].name: text.strip()}, []
    names = {f.name.lower(): f.name for f in fields}
    values: dict[str, list[str]] = {}
    stray: list[str] = []
    current: str | None = None
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        name = names.get(head.strip().lower()) if sep else None
        if name is not None:
            current = name
            values[name] = [rest.strip()]
        elif current is not None:
            values[current].append(line)
        elif line.strip():
            stray.append(line.strip())
    return {k: "\n".join(v).strip() for k, v in values.items()}, stray


def prompt_text(fields: Sequence[Field], *, limit: int) -> str | None:
    """The form as `name: value` lines to copy, change and send back; None when it does not
    fit in `limit` characters (the web page holds it then)."""
    lines: list[str] = []
    for field in fields:
        value = field.value
        shown = ("yes" if value else "no") if isinstance(value, bool) else (value or "")
        lines.append(f"{field.name}: {shown}")
    text = "\n".join(lines)
    return text if len(text) <= limit else None


def errors_text(errors: Mapping[str, str]) -> str:
    """Errors by field, one line each, for a note."""
    return "\n".join(f"• {name or 'arguments'}: {message}" for name, message in errors.items())
