"""A tool's input schema as a tree of form inputs.

Building a form, reading one back and naming validation errors all need the same answer to
"which inputs does this schema have": this module is that answer, computed once per schema.
It follows local ``$ref``s (pydantic/MCP style) and a lone ``allOf``, splits ``X | None``
into ``X`` and a nullable flag, and expands nested objects into groups up to a depth; arrays,
free-form objects, real unions, recursive models and unknown types become JSON inputs.

Remote ``$ref``s are never fetched: a tool's schema is not trusted to make this process open
URLs, so such a property is edited as JSON and left to the validator to judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pizzabot.agent.argforms.names import field_name

__all__ = [
    "WHOLE_ARGUMENTS",
    "FieldKind",
    "Group",
    "Leaf",
    "Node",
    "Schema",
    "choices",
    "is_null",
    "leaves",
    "pointer",
    "tree",
]

FieldKind: TypeAlias = Literal[
    "text", "textarea", "number", "integer", "checkbox", "select", "multiselect", "json"
]

Schema: TypeAlias = Mapping[str, Any]

#: The name of the single JSON field offered when a schema declares no properties at all.
WHOLE_ARGUMENTS = "arguments"

_MAX_DEPTH = 4  # deeper objects are edited as JSON: a form of 5 nested levels helps nobody


@dataclass(frozen=True)
class Leaf:
    """One input: a property a person types (or picks, or writes as JSON)."""

    path: tuple[str, ...]
    kind: FieldKind
    node: Schema  # resolved, with the null branch removed
    label: str
    nullable: bool
    required_here: bool  # required by the object that holds it
    required: bool  # required all the way up: what a form marks with an asterisk
    enum: tuple[Any, ...]
    #: How each of `enum` reads where the schema titles its choices (`oneOf` of `const` +
    #: `title`, or `enumNames`); empty: the values read as themselves.
    titles: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return field_name(self.path) if self.path else WHOLE_ARGUMENTS


@dataclass(frozen=True)
class Group:
    """A nested object whose members are inputs of their own."""

    path: tuple[str, ...]
    nullable: bool
    required_here: bool
    label: str
    default: Any
    children: tuple[Leaf | Group, ...]


Node: TypeAlias = Leaf | Group

_Seen: TypeAlias = frozenset[str]


def _resolve(root: Schema, node: Any, seen: _Seen) -> tuple[Schema, bool, _Seen]:
    """Follow local ``$ref``s (and a lone ``allOf``).

    Returns the schema, whether a form can use it, and the refs followed on the way down
    (``seen``), so a model that contains itself stops expanding and becomes a JSON field.
    Sibling keywords next to a ``$ref`` (pydantic puts ``description`` there) win over the
    target's, as they describe this use of the shared definition.
    """
    if not isinstance(node, Mapping):
        return ({}, node is not False, seen)
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen or not ref.startswith("#"):
            return (node, False, seen)  # recursive or remote: edit as JSON, jsonschema judges
        target = pointer(root, ref[1:])
        if target is None:
            return (node, False, seen)
        resolved, ok, seen = _resolve(root, target, seen | {ref})
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return ({**resolved, **siblings}, ok, seen)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        resolved, ok, seen = _resolve(root, all_of[0], seen)
        rest = {k: v for k, v in node.items() if k != "allOf"}
        return ({**resolved, **rest}, ok, seen)
    return (node, True, seen)


def pointer(root: Schema, json_pointer: str) -> Any:
    """What a local JSON pointer (``/$defs/Address``) points at in ``root``, else ``None``."""
    current: Any = root
    for raw in json_pointer.split("/")[1:] if json_pointer else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return None
    return current


def is_null(node: Any) -> bool:
    """Whether a schema allows only ``null`` (the ``None`` branch of ``X | None``)."""
    return isinstance(node, Mapping) and (
        node.get("type") == "null" or node.get("type") == ["null"] or node.get("const", 0) is None
    )


def _property(root: Schema, raw: Any, seen: _Seen) -> tuple[Schema, bool, bool, _Seen]:
    """A property's schema with ``X | None`` split into ``X`` and a nullable flag.

    Returns (schema, nullable, usable by a form, refs followed).
    """
    node, ok, seen = _resolve(root, raw, seen)
    if not ok:
        return (node, False, False, seen)
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list):
            real = [b for b in branches if not is_null(_resolve(root, b, seen)[0])]
            if real and all(isinstance(b, Mapping) and "const" in b for b in real):
                # A titled choice (`const` + `title` per option), not a union of types.
                return ({**node, key: real}, len(real) < len(branches), True, seen)
            if len(real) == 1 and len(real) < len(branches):
                outer = {k: v for k, v in node.items() if k != key}
                inner, _, ok, seen = _property(root, real[0], seen)
                return ({**inner, **outer}, True, ok, seen)
            return (node, False, False, seen)  # a real union: only JSON can say which branch
    types = node.get("type")
    if isinstance(types, list):
        rest = [t for t in types if t != "null"]
        nullable = len(rest) < len(types)
        if len(rest) == 1:
            return ({**node, "type": rest[0]}, nullable, True, seen)
        return (node, nullable, False, seen)
    enum = node.get("enum")
    if isinstance(enum, list) and None in enum:
        return ({**node, "enum": [v for v in enum if v is not None]}, True, True, seen)
    return (node, False, True, seen)


def _expandable(node: Schema) -> bool:
    props = node.get("properties")
    return (
        node.get("type", "object") == "object"
        and isinstance(props, Mapping)
        and bool(props)
        and not isinstance(node.get("additionalProperties"), Mapping)
        and "patternProperties" not in node
    )


def choices(node: Schema) -> tuple[tuple[Any, ...], tuple[str, ...]] | None:
    """The options of a choice and how each reads: `oneOf`/`anyOf` of `const` (+ `title`),
    or `enum` (+ `enumNames`, titles empty without them); None when ``node`` is no choice."""
    for key in ("oneOf", "anyOf"):
        branches = node.get(key)
        if (
            isinstance(branches, list)
            and branches
            and all(isinstance(b, Mapping) and "const" in b for b in branches)
        ):
            values = tuple(b["const"] for b in branches)
            titles = tuple(_title(b.get("title"), b["const"]) for b in branches)
            return values, titles
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        names = node.get("enumNames")
        if isinstance(names, list) and len(names) == len(enum):
            return tuple(enum), tuple(_title(n, v) for n, v in zip(names, enum, strict=True))
        return tuple(enum), ()
    return None


def _title(title: Any, value: Any) -> str:
    if isinstance(title, str) and title:
        return title
    return value if isinstance(value, str) else repr(value)


def _kind(node: Schema, usable: bool) -> tuple[FieldKind, tuple[Any, ...], tuple[str, ...]]:
    """The input for a property: its kind, its options and their titles."""
    if not usable:
        return ("json", (), ())
    found = choices(node)
    if found is not None:
        return ("select", *found)
    items = node.get("items")
    if node.get("type") == "array" and isinstance(items, Mapping):
        several = choices(items)
        if several is not None:
            return ("multiselect", *several)
    kind, enum = _plain_kind(node)
    return (kind, enum, ())


def _plain_kind(node: Schema) -> tuple[FieldKind, tuple[Any, ...]]:
    if isinstance(node.get("enum"), list) and node["enum"]:
        return ("select", tuple(node["enum"]))
    if "const" in node:
        return ("select", (node["const"],))
    match node.get("type"):
        case "boolean":
            return ("checkbox", ())
        case "integer":
            return ("integer", ())
        case "number":
            return ("number", ())
        case "string":
            return ("text", ())
    return ("json", ())


def tree(root: Schema) -> tuple[Node, ...]:
    """The inputs of a schema: its properties, nested objects as groups. A schema that
    declares no properties is one JSON input named :data:`WHOLE_ARGUMENTS`."""
    top, ok, seen = _resolve(root, root, frozenset())
    if ok and isinstance(top.get("properties"), Mapping):
        return _children(root, top, (), seen, parent_required=True)
    if top.get("additionalProperties") is False:
        return ()
    # No declared properties: the arguments are free-form, so offer them as one JSON object.
    return (Leaf((), "json", top, "Arguments", False, True, True, ()),)


def _children(
    root: Schema, obj: Schema, path: tuple[str, ...], seen: _Seen, *, parent_required: bool
) -> tuple[Node, ...]:
    required = obj.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    out: list[Node] = []
    for key, raw in obj["properties"].items():
        own = raw if isinstance(raw, Mapping) else {}
        node, nullable, ok, inner_seen = _property(root, raw, seen)
        here = key in required_names
        child_path = (*path, str(key))
        # pydantic titles a $ref's target after its class: only the property's own title fits.
        label = str(own.get("title") or key)
        if ok and _expandable(node) and len(child_path) < _MAX_DEPTH:
            sub_required = parent_required and here and not nullable
            kids = _children(root, node, child_path, inner_seen, parent_required=sub_required)
            out.append(Group(child_path, nullable, here, label, node.get("default"), kids))
            continue
        kind, enum, titles = _kind(node, ok)
        if kind == "checkbox" and nullable:
            kind, enum = "select", (True, False)  # a checkbox cannot say "no value"
        out.append(
            Leaf(
                child_path,
                kind,
                node,
                label,
                nullable,
                here,
                parent_required and here,
                enum,
                titles,
            )
        )
    return tuple(out)


def leaves(nodes: Iterable[Node]) -> Iterator[Leaf]:
    """Every input under ``nodes``, groups flattened, in form order."""
    for node in nodes:
        if isinstance(node, Leaf):
            yield node
        else:
            yield from leaves(node.children)
