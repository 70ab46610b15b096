"""What an edit by mail means: the fields a reply names, merged into the proposed arguments
and checked by the tool's schema as the web form and the Slack modal check them, and the
answer that says what is wrong."""

from __future__ import annotations

from typing import Any

from pizzabot.agent.argforms import coerce_form, field_path, form_fields, validate_arguments
from pizzabot.agent.model import Item, ItemKind
from pizzabot.channels.email.replies import Command

__all__ = ["edit_arguments", "edit_errors"]


def edit_arguments(item: Item, command: Command) -> tuple[dict[str, Any], dict[str, str]]:
    """The edited arguments: the proposed ones with the person's fields merged in, coerced
    and checked by the tool's schema as the web form and the Slack modal do it. Returns the
    arguments and errors by field (empty when they may run)."""
    if item.kind is not ItemKind.TOOL:
        return {}, {"": "this item can be approved or rejected, not edited"}
    if command.problem:
        return {}, {"": command.problem}
    schema = item.schema or {}
    current = dict(item.args or {})
    errors: dict[str, str] = {}
    if command.typed:
        props = schema.get("properties")
        if isinstance(props, dict):
            for name in command.values:
                if name not in props:
                    errors[name] = f"no such field; the fields are {', '.join(props)}"
        merged = {**current, **command.values}
        for name, message in validate_arguments(schema, merged).items():
            errors.setdefault(name, message)
        return merged, errors
    fields = form_fields(schema, current)
    names = {f.name.lower(): f.name for f in fields}
    raw: dict[str, str | bool | None] = {f.name: f.value for f in fields}
    touched: set[str] = set()
    for name, value in command.values.items():
        real = names.get(name.lower())
        if real is None:
            errors[name] = "no such field; the fields are " + ", ".join(f.name for f in fields)
        else:
            raw[real] = value
            touched.add(field_path(real)[0])
    args, more = coerce_form(schema, raw)
    for name, message in more.items():
        errors.setdefault(name, message)
    # The form fills in defaults for what the model left out; keep those out unless asked.
    args = {k: v for k, v in args.items() if k in current or k in touched}
    return args, errors


def edit_errors(errors: dict[str, str]) -> str:
    lines = ["Your edit was not applied; the action still waits for a decision.", ""]
    for name, message in errors.items():
        lines.append(f"- {name or 'arguments'}: {message}")
    lines += [
        "",
        'Reply again with "edit" and corrected "name: value" lines, or approve or reject.',
    ]
    return "\n".join(lines)
