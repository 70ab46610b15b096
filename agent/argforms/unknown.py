"""Fields the tool's schema does not declare, found before the tool ever sees them.

JSON Schema's default lets an object carry any field it does not declare. For arguments that
people edit, that default is wrong: an edit's typo (``copy`` for ``copies``) would reach the
tool while the field the person meant stays unchanged. So a field the schema does not declare
is refused unless the object's schema says ``additionalProperties: true`` (or gives a schema
for them), nested objects alike. An object schema that declares no fields at all (no
``properties``) stays free-form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pizzabot.agent.argforms.schema_walk import Schema, pointer

__all__ = ["Path", "matches", "undeclared"]

Path: TypeAlias = tuple[Any, ...]
#: What a schema that cannot be read here (a remote ``$ref``) counts as: anything goes.
_OPEN: Schema = {"additionalProperties": True}


def undeclared(root: Schema, args: Any) -> list[tuple[Path, tuple[str, ...]]]:
    """Where ``args`` has a field its schema does not declare, with the fields it does.

    Every schema that applies to a value counts (``$ref``, ``allOf``, each branch of
    ``anyOf``/``oneOf``, ``then``/``else``): a field declared by any of them is known, and
    one that any of them opens (``additionalProperties`` or ``unevaluatedProperties`` true or
    a schema) lets undeclared fields through. An object whose schemas declare no fields at
    all is free-form.
    """
    found: list[tuple[Path, tuple[str, ...]]] = []
    stack: list[tuple[Path, list[Any], Any]] = [((), [root], args)]
    while stack:
        path, nodes, value = stack.pop()
        shapes = _shapes(root, nodes)
        if isinstance(value, Mapping):
            members = _members(shapes)
            for key, member in value.items():
                subs = members.schemas(str(key))
                if subs is None:
                    found.append(((*path, key), tuple(members.declared)))
                    continue
                stack.append(((*path, key), subs, member))
        elif isinstance(value, list):
            for i, member in enumerate(value):
                subs = [sub for node in shapes for sub in _item_schemas(node, i)]
                stack.append(((*path, i), subs, member))
    return sorted(found, key=lambda f: str(f[0]))


@dataclass
class _Members:
    """What the schemas of one object say about its fields, taken together."""

    declared: dict[str, list[Any]] = field(default_factory=dict)
    patterns: list[tuple[str, Any]] = field(default_factory=list)
    extra: list[Any] = field(default_factory=list)
    closed: bool = False
    opened: bool = False

    def schemas(self, key: str) -> list[Any] | None:
        """The schemas that apply to the field ``key``; ``None`` if it is not allowed."""
        subs = self.declared.get(key, []) + [
            sub for pattern, sub in self.patterns if matches(pattern, key)
        ]
        if subs:
            return subs
        if self.closed and not self.opened:
            return None
        return self.extra


def _members(shapes: list[Schema]) -> _Members:
    members = _Members()
    for node in shapes:
        props = node.get("properties")
        if isinstance(props, Mapping):
            members.closed = True
            for key, sub in props.items():
                members.declared.setdefault(str(key), []).append(sub)
        pats = node.get("patternProperties")
        if isinstance(pats, Mapping):
            members.closed = True
            members.patterns.extend((str(p), sub) for p, sub in pats.items())
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            more = node.get(keyword)
            if more is True or isinstance(more, Mapping):
                members.opened = True
                if isinstance(more, Mapping):
                    members.extra.append(more)
            elif more is False:
                members.closed = True
    return members


def _shapes(root: Schema, nodes: list[Any]) -> list[Schema]:
    """Every schema object that applies to one value, with references and combinations
    followed (each reference once: a recursive schema stops at the value's depth)."""
    out: list[Schema] = []
    todo = list(nodes)
    refs: set[str] = set()
    while todo:
        node = todo.pop()
        if not isinstance(node, Mapping):
            continue  # true: anything; false: jsonschema already refuses the value
        out.append(node)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref not in refs:
            refs.add(ref)
            target = pointer(root, ref[1:]) if ref.startswith("#") else None
            todo.append(_OPEN if target is None else target)
        for keyword in ("allOf", "anyOf", "oneOf"):
            branches = node.get(keyword)
            if isinstance(branches, list):
                todo.extend(branches)
        for keyword in ("then", "else"):
            if keyword in node:
                todo.append(node[keyword])
    return out


def _item_schemas(node: Schema, index: int) -> list[Any]:
    prefix = node.get("prefixItems")
    items = node.get("items")
    if isinstance(items, list):  # before draft 2020-12, a list of items was the tuple form
        prefix, items = items, node.get("additionalItems")
    if isinstance(prefix, list) and index < len(prefix):
        return [prefix[index]]
    return [items] if items is not None else []


def matches(pattern: str, name: str) -> bool:
    """Whether a ``patternProperties`` pattern matches ``name`` (a broken pattern: never)."""
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False
