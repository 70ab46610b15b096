"""The edit form of a tool call: one :class:`Field` per input, prefilled.

A channel draws these as it can (HTML inputs, Slack blocks, ``name: value`` lines in a
mail), but which inputs there are, how each is labelled and what it shows first is decided
here, so a person sees the same form on every channel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pizzabot.agent.argforms.schema_walk import FieldKind, Group, Leaf, Node, Schema, tree

__all__ = ["Field", "chosen", "form_fields", "option_text"]


@dataclass(frozen=True)
class Field:
    """One input of an edit form.

    ``name`` is the property, dotted for members of nested objects (``address.city``; see
    :func:`~agent.argforms.names.field_name` for a dot inside a property's own name), and
    ``label`` its title after its objects' (``Address › City``). ``value`` is what to prefill,
    already rendered for a form: ``str`` for every kind but ``checkbox`` (``bool``); ``None``
    means an empty input. A ``select`` offers ``options``; when ``required`` is false or
    ``nullable`` is true, a channel should also offer an empty choice. ``minimum``/``maximum``
    are inclusive bounds for numbers (exclusive bounds are still enforced on submit);
    ``min_length``/``max_length`` count characters of text.

    Where the schema titles its choices, ``option_labels`` says how each of ``options`` reads
    (empty: they read as themselves); the submitted value is still the option's text. A
    ``multiselect`` offers ``options`` too, and its ``value`` is the chosen options' texts as
    a JSON list (:func:`chosen` reads it back); it is submitted the same way, or as option
    texts or labels separated by commas.
    """

    name: str
    kind: FieldKind
    label: str
    description: str | None
    required: bool
    nullable: bool
    options: tuple[str, ...]
    value: str | bool | None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    option_labels: tuple[str, ...] = ()

    def labelled_options(self) -> list[tuple[str, str]]:
        """Each option's text (what is submitted) with how it reads."""
        labels = self.option_labels or self.options
        return list(zip(self.options, labels, strict=True))


def chosen(field: Field) -> tuple[str, ...]:
    """The options a ``multiselect`` field has chosen (its ``value``, a JSON list)."""
    if not isinstance(field.value, str):
        return ()
    try:
        picked = json.loads(field.value)
    except ValueError:
        return ()
    if not isinstance(picked, list):
        return ()
    return tuple(o for o in field.options if o in {option_text(v) for v in picked})


def form_fields(schema: Schema, values: Mapping[str, Any]) -> list[Field]:
    """The form for ``schema``, prefilled from ``values`` (else each property's ``default``)."""
    fields: list[Field] = []
    _fill(tree(schema), values, use_defaults=True, labels=(), out=fields)
    return fields


def _fill(
    nodes: Sequence[Node],
    values: Mapping[str, Any] | None,
    *,
    use_defaults: bool,
    labels: tuple[str, ...],
    out: list[Field],
) -> None:
    for node in nodes:
        key = node.path[-1] if node.path else ""
        present = values is not None and key in values
        current = values.get(key) if values is not None else None
        if isinstance(node, Group):
            if not present and use_defaults and isinstance(node.default, Mapping):
                current, present = node.default, True
            inner = current if isinstance(current, Mapping) else None
            # An absent optional object stays absent: its members' defaults would create it.
            defaults = use_defaults and (inner is not None or (node.required_here and not present))
            _fill(
                node.children, inner, use_defaults=defaults, labels=(*labels, node.label), out=out
            )
            continue
        if node.path == ():
            current, present = dict(values or {}), True
        elif not present and use_defaults and "default" in node.node:
            current, present = node.node["default"], True
        out.append(_field(node, current if present else None, present, labels))


def _field(leaf: Leaf, current: Any, present: bool, labels: tuple[str, ...]) -> Field:
    node = leaf.node
    kind = leaf.kind
    value: str | bool | None
    if kind == "checkbox":
        value = current is True
    elif current is None and (leaf.nullable or not present):
        value = None
    elif kind == "select":
        value = option_text(current) if current in leaf.enum else _render(current)
    elif kind == "multiselect":
        picked = current if isinstance(current, list) else [current]
        value = json.dumps([option_text(v) for v in picked], ensure_ascii=False)
    elif kind == "json":
        value = json.dumps(current, indent=2, ensure_ascii=False)
    else:
        value = _render(current)
    max_length = node.get("maxLength")
    if kind == "text" and (
        (isinstance(max_length, int) and max_length > 200)
        or node.get("format") == "textarea"
        or (isinstance(value, str) and ("\n" in value or len(value) > 80))
    ):
        kind = "textarea"
    minimum = node.get("minimum", node.get("exclusiveMinimum"))
    maximum = node.get("maximum", node.get("exclusiveMaximum"))
    description = node.get("description")
    return Field(
        name=leaf.name,
        kind=kind,
        label=" › ".join((*labels, leaf.label)),
        description=description if isinstance(description, str) else None,
        required=leaf.required,
        nullable=leaf.nullable,
        options=tuple(option_text(v) for v in leaf.enum),
        value=value,
        minimum=minimum if _is_number(minimum) else None,
        maximum=maximum if _is_number(maximum) else None,
        min_length=node.get("minLength") if isinstance(node.get("minLength"), int) else None,
        max_length=max_length if isinstance(max_length, int) else None,
        format=node.get("format") if isinstance(node.get("format"), str) else None,
        option_labels=leaf.titles,
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def option_text(value: Any) -> str:
    """How an enum value reads in a form: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
