"""Schemas and arguments whose shape no check could finish with, found before any check runs.

jsonschema walks a schema by recursion, so two shapes make it fail with a ``RecursionError``
instead of an answer: a schema nested deeper than the interpreter's stack, and a ``$ref``
that leads back to itself without stepping into a part of the value (``{"$ref": "#"}``, or
``a`` → ``b`` → ``a``), which a value would be checked against forever. A schema that refers
to itself *through* a property or an item (a tree of nodes) is fine: each step goes one level
into the value, and the value ends. A value nested deep enough, checked against such a
schema, runs out of stack the same way.

So a schema is refused when it is nested deeper than :data:`MAX_NESTING` levels or has such a
cycle, and arguments are refused when they are nested deeper than :data:`MAX_NESTING`; each
answer names where, as a JSON pointer into the schema or a dotted place in the arguments.
The walks are loops, not recursion, so they finish on any input. References are resolved the
way jsonschema resolves them (``referencing``, ``$id`` and anchors included) with an empty
registry: nothing is fetched.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pizzabot.agent.argforms.messages import where

if TYPE_CHECKING:
    from referencing.jsonschema import Schema as _Contents

__all__ = ["MAX_NESTING", "nesting_problem", "schema_problem"]

#: How deep a schema, or a tool's arguments, may nest (JSON levels: an object or a list is
#: one). Real tools' schemas stay under 20; jsonschema's recursion fails past about 150.
MAX_NESTING = 64

# Keywords whose schemas apply to the same value as the schema holding them: a cycle of
# these never reaches a smaller value.
_SAME_VALUE_ONE = ("$ref", "$dynamicRef", "$recursiveRef")
_SAME_VALUE_SCHEMA = ("not", "if", "then", "else")
_SAME_VALUE_LIST = ("allOf", "anyOf", "oneOf", "extends")
_SAME_VALUE_MAP = ("dependentSchemas", "dependencies")
# Keywords whose schemas apply to a part of the value (or hold definitions).
_PART_SCHEMA = (
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "contentSchema",
)
_PART_LIST = ("prefixItems", "items")
_PART_MAP = ("properties", "patternProperties", "$defs", "definitions")


def nesting_problem(value: Any) -> tuple[tuple[Any, ...], str] | None:
    """The top-level field of `value` that nests deeper than :data:`MAX_NESTING` levels (an
    empty path: `value` itself), and a message naming the place; None when none does."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, current = stack.pop()
        if isinstance(current, Mapping):
            children: Iterator[tuple[Any, Any]] = iter(current.items())
        elif isinstance(current, list | tuple):
            children = enumerate(current)
        else:
            continue
        if len(path) >= MAX_NESTING:
            return path[:1], f"nested deeper than {MAX_NESTING} levels (at {_short(where(path))})"
        stack.extend(((*path, k), v) for k, v in children)
    return None


def schema_problem(schema: Any, *, cycles: bool = True) -> str | None:
    """Why no value can be checked against `schema` (nested too deep, or a ``$ref`` cycle
    that never steps into the value), naming where; None when it can be. `cycles=False`
    looks at the nesting alone (a walk of the schema's text, without resolving anything)."""
    deep = _too_deep(schema)
    if deep is not None:
        return f"nested deeper than {MAX_NESTING} levels (at {_short(deep)})"
    if not cycles or not isinstance(schema, Mapping):
        return None
    return _cycle(schema)


def _too_deep(schema: Any) -> str | None:
    """The JSON pointer of the first place deeper than the bound."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), schema)]
    while stack:
        path, current = stack.pop()
        if isinstance(current, Mapping):
            children: list[tuple[str, Any]] = [(str(k), v) for k, v in current.items()]
        elif isinstance(current, list):
            children = [(str(i), v) for i, v in enumerate(current)]
        else:
            continue
        if len(path) >= MAX_NESTING:
            return _pointer(path)
        stack.extend(((*path, k), v) for k, v in children)
    return None


class _Node:
    """One schema met in the walk, with the resolver of its place and how it was reached."""

    __slots__ = ("contents", "name", "resolver", "same")

    def __init__(self, contents: Mapping[str, Any], resolver: Any, name: str) -> None:
        self.contents = contents
        self.resolver = resolver
        self.name = name
        #: The schemas that apply to the same value, each with how it is reached.
        self.same: list[tuple[str, int]] = []


def _cycle(root: Mapping[str, Any]) -> str | None:
    # Imported with the first schema checked, as jsonschema is (`validate._libraries`).
    import referencing
    import referencing.exceptions
    import referencing.jsonschema

    dialect = root.get("$schema")
    spec = referencing.jsonschema.specification_with(
        dialect if isinstance(dialect, str) else "",
        default=referencing.jsonschema.DRAFT202012,
    )
    resource = spec.create_resource(_as_contents(root))
    registry: referencing.Registry[_Contents] = referencing.Registry().with_resource(
        resource.id() or "", resource
    )
    nodes: list[_Node] = []
    index: dict[int, int] = {}

    def node_of(contents: Mapping[str, Any], resolver: Any, name: str) -> int:
        if "$id" in contents or "id" in contents:
            resolver = resolver.in_subresource(spec.create_resource(_as_contents(contents)))
        found = index.get(id(contents))
        if found is None:
            found = index[id(contents)] = len(nodes)
            nodes.append(_Node(contents, resolver, name))
            todo.append(found)
        return found

    todo: list[int] = []
    node_of(root, registry.resolver(base_uri=resource.id() or ""), "/")
    while todo:
        node = nodes[todo.pop()]
        for label, child, same in _children(node):
            if isinstance(child, str):  # a reference
                try:
                    resolved = node.resolver.lookup(child)
                except (referencing.exceptions.Unresolvable, ValueError, TypeError):
                    continue  # jsonschema says so when it meets it
                if isinstance(resolved.contents, Mapping):
                    node.same.append((label, node_of(resolved.contents, resolved.resolver, child)))
                continue
            if not isinstance(child, Mapping):
                continue
            name = f"{node.name.rstrip('/')}/{label}"
            found = node_of(child, node.resolver, name)
            if same:
                node.same.append((label, found))
    return _first_cycle(nodes)


def _children(node: _Node) -> Iterator[tuple[str, Any, bool]]:
    """(label, schema or reference text, whether it applies to the same value)."""
    contents = node.contents
    for key in _SAME_VALUE_ONE:
        ref = contents.get(key)
        if isinstance(ref, str):
            yield f"{key} {ref!r}", ref, True
    for key in _SAME_VALUE_SCHEMA:
        if key in contents:
            yield key, contents[key], True
    for key in _SAME_VALUE_LIST:
        value = contents.get(key)
        if isinstance(value, list):
            yield from ((f"{key}/{i}", v, True) for i, v in enumerate(value))
        elif key == "extends":
            yield key, value, True
    for key in _SAME_VALUE_MAP:
        value = contents.get(key)
        if isinstance(value, Mapping):
            yield from ((f"{key}/{_escape(k)}", v, True) for k, v in value.items())
    for key in _PART_SCHEMA:
        if key in contents and not isinstance(contents[key], list):
            yield key, contents[key], False
    for key in _PART_LIST:
        value = contents.get(key)
        if isinstance(value, list):
            yield from ((f"{key}/{i}", v, False) for i, v in enumerate(value))
    for key in _PART_MAP:
        value = contents.get(key)
        if isinstance(value, Mapping):
            yield from ((f"{key}/{_escape(k)}", v, False) for k, v in value.items())


def _first_cycle(nodes: list[_Node]) -> str | None:
    """A cycle among the same-value steps, as the steps that make it; None when none."""
    white, grey, black = 0, 1, 2
    colour = [white] * len(nodes)
    for start in range(len(nodes)):
        if colour[start] != white:
            continue
        colour[start] = grey
        path: list[tuple[int, str]] = [(start, "")]
        stack: list[Iterator[tuple[str, int]]] = [iter(nodes[start].same)]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                colour[path.pop()[0]] = black
                continue
            label, target = step
            if colour[target] == grey:
                begin = next(i for i, (n, _) in enumerate(path) if n == target)
                steps = [lbl for _, lbl in path[begin + 1 :]] + [label]
                return (
                    f"a $ref cycle at {nodes[target].name}: {' → '.join(steps)} leads back to "
                    "it without stepping into the value, so a value would be checked forever"
                )
            if colour[target] == white:
                colour[target] = grey
                path.append((target, label))
                stack.append(iter(nodes[target].same))
    return None


def _as_contents(schema: Mapping[str, Any]) -> _Contents:
    return schema  # type: ignore[return-value]  # a JSON object, as referencing takes it


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _pointer(path: tuple[str, ...]) -> str:
    return "/" + "/".join(_escape(p) for p in path)


def _short(pointer: str, limit: int = 120) -> str:
    return pointer if len(pointer) <= limit else pointer[: limit - 1] + "…"
