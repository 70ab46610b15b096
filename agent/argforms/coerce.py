"""Submitted form values back to typed tool arguments.

Forms submit text (and checkbox flags): ``"3"``, ``"yes"``, ``""``, a JSON list. This module
reads each input by its kind, decides what an empty input means (null, the tool's default, or
"is required"), rebuilds nested objects from dotted names, then validates the whole, so every
channel turns the same typing into the same arguments and the same errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pizzabot.agent.argforms.fields import option_text
from pizzabot.agent.argforms.messages import one_of
from pizzabot.agent.argforms.numbers import loads_json, parse_integer, parse_number
from pizzabot.agent.argforms.schema_walk import (
    WHOLE_ARGUMENTS,
    Group,
    Leaf,
    Node,
    Schema,
    leaves,
    tree,
)
from pizzabot.agent.argforms.validate import add_error, validate_arguments

__all__ = ["coerce_form"]

_TRUE_WORDS = frozenset({"true", "yes", "on", "1", "y"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", ""})
_OMIT = object()


def coerce_form(
    schema: Schema, raw: Mapping[str, str | bool | None]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Typed arguments from submitted form values, and errors by field name (empty if valid).

    ``raw`` is the whole form: a field missing from it counts as empty (an unchecked
    checkbox). Empty means null for a nullable field, "use the tool's default" (omitted) for an
    optional one, and "is required" otherwise. Names ``raw`` has but the form has not are
    ignored. A channel that lets people send only the lines they change should merge them into
    the :func:`~agent.argforms.fields.form_fields` values first. With errors, the arguments
    are partial: only show them back, never run them.
    """
    errors: dict[str, str] = {}
    nodes = tree(schema)
    if len(nodes) == 1 and isinstance(nodes[0], Leaf) and nodes[0].path == ():
        submitted = raw.get(WHOLE_ARGUMENTS)
        empty = _empty(nodes[0], submitted)
        whole = {} if empty else _coerce_leaf(nodes[0], submitted, errors)
        args: dict[str, Any] = dict(whole) if isinstance(whole, Mapping) else {}
        if not isinstance(whole, Mapping) and WHOLE_ARGUMENTS not in errors:
            errors[WHOLE_ARGUMENTS] = "must be an object"
    else:
        args = _build(nodes, raw, errors)
    for name, message in validate_arguments(schema, args).items():
        add_error(errors, name, message)
    return args, errors


def _build(
    nodes: Sequence[Node], raw: Mapping[str, str | bool | None], errors: dict[str, str]
) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for node in nodes:
        key = node.path[-1]
        value: Any
        if isinstance(node, Group):
            if any(_filled(leaf, raw.get(leaf.name)) for leaf in leaves(node.children)):
                value = _build(node.children, raw, errors)
            elif node.nullable:
                value = None
            elif node.required_here:
                value = _build(node.children, raw, errors)  # to name the missing members
            else:
                value = _OMIT
        else:
            value = _coerce_leaf(node, raw.get(node.name), errors)
        if value is not _OMIT:
            obj[key] = value
    return obj


def _filled(leaf: Leaf, submitted: str | bool | None) -> bool:
    if leaf.kind == "checkbox":
        return _as_bool(submitted) is True
    return not _empty(leaf, submitted)


def _empty(leaf: Leaf, submitted: str | bool | None) -> bool:
    if submitted is None:
        return True
    if isinstance(submitted, bool):
        return False
    # Text is kept verbatim, so only a truly empty string is empty; typed values ignore spaces.
    return submitted == "" if leaf.kind in ("text", "textarea") else not submitted.strip()


def _coerce_leaf(leaf: Leaf, submitted: str | bool | None, errors: dict[str, str]) -> Any:
    if leaf.kind == "checkbox":
        flag = _as_bool(submitted)
        if flag is None:
            errors[leaf.name] = "must be true or false (yes/no)"
            return _OMIT
        return flag
    if _empty(leaf, submitted):
        if leaf.nullable:
            return None
        if leaf.required_here:
            errors[leaf.name] = "is required"
        return _OMIT
    text = submitted if isinstance(submitted, str) else json.dumps(submitted)
    try:
        return _parse(leaf, text)
    except ValueError as exc:
        errors[leaf.name] = str(exc)
        return _OMIT


def _parse(leaf: Leaf, text: str) -> Any:
    match leaf.kind:
        case "text" | "textarea":
            return text
        case "integer":
            return parse_integer(text)
        case "number":
            return parse_number(text)
        case "select":
            return _choose(leaf, text)
        case "multiselect":
            return _choose_several(leaf, text)
        case "json":
            return loads_json(text)
    raise ValueError(f"cannot read a {leaf.kind} field")  # pragma: no cover - kinds are closed


def _choose(leaf: Leaf, text: str) -> Any:
    for value in leaf.enum:
        if option_text(value) == text:
            return value
    folded = text.strip().casefold()
    for value in leaf.enum:
        if option_text(value).casefold() == folded:
            return value
    for value, title in zip(leaf.enum, leaf.titles, strict=False):
        if title.casefold() == folded:
            return value
    if all(isinstance(v, bool) for v in leaf.enum):
        flag = _as_bool(text)
        if flag is not None and flag in leaf.enum:
            return flag
    raise ValueError(one_of(leaf.enum))


def _choose_several(leaf: Leaf, text: str) -> list[Any]:
    """Several choices: a JSON list of option texts, or option texts (or their titles)
    separated by commas or lines; each at most once, in the order given."""
    stripped = text.strip()
    if stripped.startswith("["):
        picked = loads_json(stripped)
        if not isinstance(picked, list):
            raise ValueError("must be a list of choices")
        words = [v if isinstance(v, str) else json.dumps(v) for v in picked]
    else:
        words = [w.strip() for w in stripped.replace("\n", ",").split(",") if w.strip()]
    out: list[Any] = []
    for word in words:
        value = _choose(leaf, word)
        if value not in out:
            out.append(value)
    return out


def _as_bool(submitted: str | bool | None) -> bool | None:
    if submitted is None or isinstance(submitted, bool):
        return bool(submitted)
    word = submitted.strip().casefold()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return None
