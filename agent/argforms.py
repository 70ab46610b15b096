"""Tool arguments as form fields, and form input back as checked tool arguments.

An action item carries a tool's JSON input schema and the arguments the model proposed. To
*edit* them, a person needs a form: an HTML form on the web page, a modal in Slack, or
``name: value`` lines in an email reply. All three channels share this one translation so
that a value typed anywhere is coerced and checked the same way, and the engine validates
API edits (JSON) with the very same rules:

- :func:`form_fields` turns a schema (pydantic/MCP style, with local ``$ref``s) and the
  current arguments into a flat list of :class:`Field`. Nested objects become dotted names
  (``address.city``); arrays, free-form objects, unions and unknown types become JSON fields.
- :func:`field_name` and :func:`field_path` are that naming and its inverse. A dot inside one
  property's own name is written ``\\.``, so a property called ``address.city`` is the field
  ``address\\.city`` and cannot be taken for ``city`` inside ``address`` (a backslash just
  before a dot, another backslash or the name's end is doubled; any other stays as it is).
  Every channel keys its inputs by these names, so the two stay apart everywhere.
- :func:`coerce_form` turns submitted strings back into typed arguments and validates them,
  returning human messages keyed by field name (``""`` for errors tied to no field).
- :func:`validate_arguments` is that validation alone, for arguments that arrive as JSON.
- :func:`loads_json` reads JSON arguments with numbers bounded, for text from a model, a form
  or a mail.

Pure functions: no I/O. Remote ``$ref``s are never fetched (jsonschema would, by default),
because a tool's schema is not trusted to make this process open URLs.

Two rules are stricter than JSON Schema on purpose, because arguments come from people and
models, not from programs that agree on a format:

- Numbers are bounded: a whole number has at most :data:`MAX_INTEGER_DIGITS` digits, any
  number must be finite, and number text is at most :data:`MAX_NUMBER_TEXT` characters.
  Turning ``1e1000000`` into an ``int`` takes seconds of CPU on the event loop, and Python
  refuses to print an ``int`` of more than 4300 digits; a bound makes both a field error.
- A field the schema does not declare is refused unless the object's schema says
  ``additionalProperties: true`` (or gives a schema for them), nested objects alike. The
  standard's default allows them, but there an edit's typo (``copy`` for ``copies``) would
  reach the tool while the field the person meant stays unchanged. An object schema that
  declares no fields at all (no ``properties``) stays free-form.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, TypeAlias

import jsonschema
import referencing
import referencing.exceptions
from jsonschema.exceptions import ValidationError

__all__ = [
    "MAX_INTEGER_DIGITS",
    "MAX_NUMBER_TEXT",
    "Field",
    "FieldKind",
    "bounded_decoder",
    "coerce_form",
    "field_name",
    "field_path",
    "form_fields",
    "loads_json",
    "validate_arguments",
]

FieldKind: TypeAlias = Literal[
    "text", "textarea", "number", "integer", "checkbox", "select", "json"
]

Schema: TypeAlias = Mapping[str, Any]

#: The name of the single JSON field offered when a schema declares no properties at all.
WHOLE_ARGUMENTS = "arguments"

#: Digits a whole number may have: far beyond any id or amount, and cheap to convert.
MAX_INTEGER_DIGITS = 100
#: Characters a typed number may have, exponent and sign included.
MAX_NUMBER_TEXT = 200
_INTEGER_LIMIT = 10**MAX_INTEGER_DIGITS
_FLOAT_EXPONENT = 308  # beyond it a double is infinite (or zero)
_TOO_MANY_DIGITS = f"is out of range: a whole number has at most {MAX_INTEGER_DIGITS} digits"
_NOT_FINITE = "is out of range: must be a finite number"

_MAX_DEPTH = 4  # deeper objects are edited as JSON: a form of 5 nested levels helps nobody
_TRUE_WORDS = frozenset({"true", "yes", "on", "1", "y"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", ""})
_TYPE_WORDS = {
    "integer": "a whole number",
    "number": "a number",
    "string": "text",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "empty",
}


@dataclass(frozen=True)
class Field:
    """One input of an edit form.

    ``name`` is the property, dotted for members of nested objects (``address.city``; see
    :func:`field_name` for a dot inside a property's own name), and ``label`` its title
    after its objects' (``Address › City``). ``value`` is what to prefill,
    already rendered for a form: ``str`` for every kind but ``checkbox`` (``bool``); ``None``
    means an empty input. A ``select`` offers ``options``; when ``required`` is false or
    ``nullable`` is true, a channel should also offer an empty choice. ``minimum``/``maximum``
    are inclusive bounds for numbers (exclusive bounds are still enforced on submit);
    ``min_length``/``max_length`` count characters of text.
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


@dataclass(frozen=True)
class _Leaf:
    path: tuple[str, ...]
    kind: FieldKind
    node: Schema  # resolved, with the null branch removed
    label: str
    nullable: bool
    required_here: bool  # required by the object that holds it
    required: bool  # required all the way up: what a form marks with an asterisk
    enum: tuple[Any, ...]

    @property
    def name(self) -> str:
        return field_name(self.path) if self.path else WHOLE_ARGUMENTS


@dataclass(frozen=True)
class _Group:
    path: tuple[str, ...]
    nullable: bool
    required_here: bool
    label: str
    default: Any
    children: tuple[_Leaf | _Group, ...]


_Node: TypeAlias = _Leaf | _Group


# --- field names -------------------------------------------------------------------------


def field_name(path: Sequence[str]) -> str:
    """The field name of a property path: its names joined by dots, each dot inside a name
    written ``\\.`` (``("address", "city")`` is ``address.city``, ``("address.city",)`` is
    ``address\\.city``). A backslash is doubled only where it would read as an escape: before
    a dot, before another backslash, or at the end of a name."""
    return ".".join(_escape(part) for part in path)


def _escape(part: str) -> str:
    out: list[str] = []
    for i, char in enumerate(part):
        if char == ".":
            out.append("\\.")
        elif char == "\\" and (i + 1 == len(part) or part[i + 1] in ".\\"):
            out.append("\\\\")
        else:
            out.append(char)
    return "".join(out)


def field_path(name: str) -> tuple[str, ...]:
    """The property path a field name stands for: the inverse of :func:`field_name`."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(name):
        char = name[i]
        if char == "\\" and i + 1 < len(name) and name[i + 1] in ".\\":
            current.append(name[i + 1])
            i += 2
            continue
        if char == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return tuple(parts)


# --- reading schemas ---------------------------------------------------------------------


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
        target = _pointer(root, ref[1:])
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


def _pointer(root: Schema, pointer: str) -> Any:
    current: Any = root
    for raw in pointer.split("/")[1:] if pointer else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return None
    return current


def _is_null(node: Any) -> bool:
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
            real = [b for b in branches if not _is_null(_resolve(root, b, seen)[0])]
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


def _kind(node: Schema, usable: bool) -> tuple[FieldKind, tuple[Any, ...]]:
    if not usable:
        return ("json", ())
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


def _tree(root: Schema) -> tuple[_Node, ...]:
    top, ok, seen = _resolve(root, root, frozenset())
    if ok and isinstance(top.get("properties"), Mapping):
        return _children(root, top, (), seen, parent_required=True)
    if top.get("additionalProperties") is False:
        return ()
    # No declared properties: the arguments are free-form, so offer them as one JSON object.
    return (_Leaf((), "json", top, "Arguments", False, True, True, ()),)


def _children(
    root: Schema, obj: Schema, path: tuple[str, ...], seen: _Seen, *, parent_required: bool
) -> tuple[_Node, ...]:
    required = obj.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    out: list[_Node] = []
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
            out.append(_Group(child_path, nullable, here, label, node.get("default"), kids))
            continue
        kind, enum = _kind(node, ok)
        if kind == "checkbox" and nullable:
            kind, enum = "select", (True, False)  # a checkbox cannot say "no value"
        out.append(
            _Leaf(child_path, kind, node, label, nullable, here, parent_required and here, enum)
        )
    return tuple(out)


def _leaves(nodes: Iterable[_Node]) -> Iterator[_Leaf]:
    for node in nodes:
        if isinstance(node, _Leaf):
            yield node
        else:
            yield from _leaves(node.children)


# --- schema -> form ----------------------------------------------------------------------


def form_fields(schema: Schema, values: Mapping[str, Any]) -> list[Field]:
    """The form for ``schema``, prefilled from ``values`` (else each property's ``default``)."""
    fields: list[Field] = []
    _fill(_tree(schema), values, use_defaults=True, labels=(), out=fields)
    return fields


def _fill(
    nodes: Sequence[_Node],
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
        if isinstance(node, _Group):
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


def _field(leaf: _Leaf, current: Any, present: bool, labels: tuple[str, ...]) -> Field:
    node = leaf.node
    kind = leaf.kind
    value: str | bool | None
    if kind == "checkbox":
        value = current is True
    elif current is None and (leaf.nullable or not present):
        value = None
    elif kind == "select":
        value = _option(current) if current in leaf.enum else _render(current)
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
        options=tuple(_option(v) for v in leaf.enum),
        value=value,
        minimum=minimum if _is_number(minimum) else None,
        maximum=maximum if _is_number(maximum) else None,
        min_length=node.get("minLength") if isinstance(node.get("minLength"), int) else None,
        max_length=max_length if isinstance(max_length, int) else None,
        format=node.get("format") if isinstance(node.get("format"), str) else None,
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _option(value: Any) -> str:
    """How an enum value reads in a form: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


# --- form -> arguments -------------------------------------------------------------------


def coerce_form(
    schema: Schema, raw: Mapping[str, str | bool | None]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Typed arguments from submitted form values, and errors by field name (empty if valid).

    ``raw`` is the whole form: a field missing from it counts as empty (an unchecked
    checkbox). Empty means null for a nullable field, "use the tool's default" (omitted) for an
    optional one, and "is required" otherwise. Names ``raw`` has but the form has not are
    ignored. A channel that lets people send only the lines they change should merge them into
    the :func:`form_fields` values first. With errors, the arguments are partial: only show
    them back, never run them.
    """
    errors: dict[str, str] = {}
    nodes = _tree(schema)
    if len(nodes) == 1 and isinstance(nodes[0], _Leaf) and nodes[0].path == ():
        submitted = raw.get(WHOLE_ARGUMENTS)
        empty = _empty(nodes[0], submitted)
        whole = {} if empty else _coerce_leaf(nodes[0], submitted, errors)
        args: dict[str, Any] = dict(whole) if isinstance(whole, Mapping) else {}
        if not isinstance(whole, Mapping) and WHOLE_ARGUMENTS not in errors:
            errors[WHOLE_ARGUMENTS] = "must be an object"
    else:
        args = _build(nodes, raw, errors)
    for name, message in validate_arguments(schema, args).items():
        if name == "" and "" in errors:
            errors[""] = f"{errors['']}; {message}"
        errors.setdefault(name, message)
    return args, errors


_OMIT = object()


def _build(
    nodes: Sequence[_Node], raw: Mapping[str, str | bool | None], errors: dict[str, str]
) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for node in nodes:
        key = node.path[-1]
        value: Any
        if isinstance(node, _Group):
            if any(_filled(leaf, raw.get(leaf.name)) for leaf in _leaves(node.children)):
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


def _filled(leaf: _Leaf, submitted: str | bool | None) -> bool:
    if leaf.kind == "checkbox":
        return _as_bool(submitted) is True
    return not _empty(leaf, submitted)


def _empty(leaf: _Leaf, submitted: str | bool | None) -> bool:
    if submitted is None:
        return True
    if isinstance(submitted, bool):
        return False
    # Text is kept verbatim, so only a truly empty string is empty; typed values ignore spaces.
    return submitted == "" if leaf.kind in ("text", "textarea") else not submitted.strip()


def _coerce_leaf(leaf: _Leaf, submitted: str | bool | None, errors: dict[str, str]) -> Any:
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


def _parse(leaf: _Leaf, text: str) -> Any:
    match leaf.kind:
        case "text" | "textarea":
            return text
        case "integer":
            number = _decimal(text, "must be a whole number")
            if number != number.to_integral_value():
                raise ValueError("must be a whole number")
            if number.adjusted() >= MAX_INTEGER_DIGITS:
                raise ValueError(_TOO_MANY_DIGITS)
            return int(number)
        case "number":
            number = _decimal(text, "must be a number")
            whole = number == number.to_integral_value() and not any(c in text for c in ".eE")
            if whole and number.adjusted() < MAX_INTEGER_DIGITS:
                return int(number)
            return _float(number)
        case "select":
            return _choose(leaf, text)
        case "json":
            return loads_json(text)
    raise ValueError(f"cannot read a {leaf.kind} field")  # pragma: no cover - kinds are closed


def _decimal(text: str, message: str) -> Decimal:
    """The number typed, with its size checked before anything converts it: ``int()`` of
    ``Decimal("1e1000000")`` takes seconds."""
    text = text.strip()
    if len(text) > MAX_NUMBER_TEXT:
        raise ValueError(f"is too long for a number (at most {MAX_NUMBER_TEXT} characters)")
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(message) from None
    if not number.is_finite():
        raise ValueError(message)
    return number


def _float(number: Decimal) -> float:
    if number and abs(number.adjusted()) > _FLOAT_EXPONENT:
        raise ValueError(_NOT_FINITE if number.adjusted() > 0 else "is too small: use 0")
    value = float(number)
    if not math.isfinite(value):
        raise ValueError(_NOT_FINITE)
    return value


# --- JSON with bounded numbers -----------------------------------------------------------


class _OutOfRange(ValueError):
    pass


def _json_int(text: str) -> int:
    # Counted before int(): Python refuses > 4300 digits, and converting fewer is still slow.
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _OutOfRange(f"a number {_TOO_MANY_DIGITS}")
    return int(text)


def _json_float(text: str) -> float:
    if len(text) > MAX_NUMBER_TEXT:
        raise _OutOfRange(f"a number is too long (at most {MAX_NUMBER_TEXT} characters)")
    try:
        return _float(Decimal(text))
    except ValueError as exc:
        raise _OutOfRange(f"a number {exc}") from None


def _json_constant(name: str) -> Any:
    raise _OutOfRange(f"{name} is not a number JSON allows")


def bounded_decoder() -> json.JSONDecoder:
    """A JSON decoder whose numbers are bounded as in a form field (``raw_decode`` for JSON
    with text after it, as in a mail); its errors are ``ValueError``s."""
    return json.JSONDecoder(
        parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant
    )


def loads_json(text: str) -> Any:
    """JSON from text, with each number bounded as in a form field.

    Raises ``ValueError`` with a message for a person: invalid JSON, a number out of range,
    ``NaN``/``Infinity`` (which Python's ``json`` would otherwise accept), or nesting too
    deep to read.
    """
    try:
        return bounded_decoder().decode(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except _OutOfRange as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None


def _choose(leaf: _Leaf, text: str) -> Any:
    for value in leaf.enum:
        if _option(value) == text:
            return value
    folded = text.strip().casefold()
    for value in leaf.enum:
        if _option(value).casefold() == folded:
            return value
    if all(isinstance(v, bool) for v in leaf.enum):
        flag = _as_bool(text)
        if flag is not None and flag in leaf.enum:
            return flag
    raise ValueError(_one_of(leaf.enum))


def _as_bool(submitted: str | bool | None) -> bool | None:
    if submitted is None or isinstance(submitted, bool):
        return bool(submitted)
    word = submitted.strip().casefold()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return None


# --- validation --------------------------------------------------------------------------


def validate_arguments(schema: Schema, args: Mapping[str, Any]) -> dict[str, str]:
    """Check ``args`` against ``schema``; human messages keyed by form field name.

    Errors inside a field (an item of a JSON list) name their place: ``"[0]: must be text"``.
    Errors tied to no field go under ``""``, joined with ``"; "``. A field the schema does not
    declare is an error under its own dotted name (``copy``, ``address.zip``) that lists the
    known ones; a number out of range is an error before the schema is even consulted.
    """
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    fields = {leaf.path: leaf.name for leaf in _leaves(_tree(schema))}
    errors: dict[str, str] = {}
    # First, and alone: jsonschema's messages repr() the value, which fails past 4300 digits.
    for path, message in _out_of_range(args):
        _add(errors, *_locate(fields, path, message))
    if errors:
        return errors
    try:
        cls.check_schema(schema)
        # An empty registry: without one jsonschema fetches remote $refs over the network.
        validator = cls(schema, registry=referencing.Registry(), format_checker=cls.FORMAT_CHECKER)
        found = list(validator.iter_errors(dict(args)))
    except jsonschema.SchemaError as exc:
        return {"": f"the tool's input schema is invalid: {exc.message}"}
    except referencing.exceptions.Unresolvable as exc:
        return {"": f"the tool's input schema refers to something unavailable: {exc}"}
    unknown = _undeclared(schema, args)
    for path, known in unknown:
        name, message = _locate(fields, path, _unknown_message(path, known))
        if name == "" and path:
            name, message = _where(path), _unknown_message(path, known)
        _add(errors, name, message)
    reported = {path for path, _ in unknown}
    for error in found:
        for leaf_error in _flatten(error):
            for path, message in _messages(leaf_error):
                if path in reported:
                    continue
                _add(errors, *_locate(fields, path, message))
    return errors


def _add(errors: dict[str, str], name: str, message: str) -> None:
    if name == "" and "" in errors:
        errors[""] = f"{errors['']}; {message}"
    errors.setdefault(name, message)


def _out_of_range(value: Any) -> list[tuple[tuple[Any, ...], str]]:
    """Where ``value`` holds a number no field accepts (infinite, NaN, too many digits), and
    which limit it broke."""
    bad: list[tuple[tuple[Any, ...], str]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:  # a loop, not recursion: JSON nests as deep as its parser allowed
        path, current = stack.pop()
        if isinstance(current, bool):
            continue
        if isinstance(current, int):
            if abs(current) >= _INTEGER_LIMIT:
                bad.append((path, _TOO_MANY_DIGITS))
        elif isinstance(current, float):
            if not math.isfinite(current):
                bad.append((path, _NOT_FINITE))
        elif isinstance(current, Mapping):
            stack.extend(((*path, k), v) for k, v in current.items())
        elif isinstance(current, list | tuple):
            stack.extend(((*path, i), v) for i, v in enumerate(current))
    return sorted(bad, key=lambda found: str(found[0]))


_Path: TypeAlias = tuple[Any, ...]
#: What a schema that cannot be read here (a remote ``$ref``) counts as: anything goes.
_OPEN: Schema = {"additionalProperties": True}


def _undeclared(root: Schema, args: Any) -> list[tuple[_Path, tuple[str, ...]]]:
    """Where ``args`` has a field its schema does not declare, with the fields it does.

    Every schema that applies to a value counts (``$ref``, ``allOf``, each branch of
    ``anyOf``/``oneOf``, ``then``/``else``): a field declared by any of them is known, and
    one that any of them opens (``additionalProperties`` or ``unevaluatedProperties`` true or
    a schema) lets undeclared fields through. An object whose schemas declare no fields at
    all is free-form.
    """
    found: list[tuple[_Path, tuple[str, ...]]] = []
    stack: list[tuple[_Path, list[Any], Any]] = [((), [root], args)]
    while stack:
        path, nodes, value = stack.pop()
        shapes = _shapes(root, nodes)
        if isinstance(value, Mapping):
            declared: dict[str, list[Any]] = {}
            patterns: list[tuple[str, Any]] = []
            extra: list[Any] = []
            closed = opened = False
            for node in shapes:
                props = node.get("properties")
                if isinstance(props, Mapping):
                    closed = True
                    for key, sub in props.items():
                        declared.setdefault(str(key), []).append(sub)
                pats = node.get("patternProperties")
                if isinstance(pats, Mapping):
                    closed = True
                    patterns.extend((str(p), sub) for p, sub in pats.items())
                for keyword in ("additionalProperties", "unevaluatedProperties"):
                    more = node.get(keyword)
                    if more is True or isinstance(more, Mapping):
                        opened = True
                        if isinstance(more, Mapping):
                            extra.append(more)
                    elif more is False:
                        closed = True
            for key, member in value.items():
                subs = declared.get(str(key), []) + [
                    sub for pattern, sub in patterns if _matches(pattern, str(key))
                ]
                if not subs:
                    if closed and not opened:
                        found.append(((*path, key), tuple(declared)))
                        continue
                    subs = extra
                stack.append(((*path, key), subs, member))
        elif isinstance(value, list):
            for i, member in enumerate(value):
                subs = [sub for node in shapes for sub in _item_schemas(node, i)]
                stack.append(((*path, i), subs, member))
    return sorted(found, key=lambda f: str(f[0]))


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
            target = _pointer(root, ref[1:]) if ref.startswith("#") else None
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


def _matches(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def _unknown_message(path: _Path, known: tuple[str, ...]) -> str:
    owner = "this tool" if len(path) == 1 else _where(path[:-1])
    if not known:
        return f"unknown field: {owner} has no fields"
    return f"unknown field; the fields of {owner} are: {', '.join(map(_escape, known))}"


def _flatten(error: ValidationError) -> list[ValidationError]:
    """Look through ``X | None``: report why the value is not an ``X``, not "no branch fits"."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return [error]
    real = [e for e in error.context if not (e.validator == "type" and _is_null(e.schema))]
    branches = {e.relative_schema_path[0] for e in real if e.relative_schema_path}
    if len(branches) != 1:
        return [error]
    return [leaf for e in real for leaf in _flatten(e)]


def _messages(error: ValidationError) -> list[tuple[tuple[Any, ...], str]]:
    path = tuple(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, Mapping):
        missing = [k for k in error.validator_value if k not in instance]
        return [((*path, k), "is required") for k in missing]
    if error.validator == "additionalProperties" and isinstance(instance, Mapping):
        declared = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = [
            k
            for k in instance
            if k not in declared and not any(_matches(p, str(k)) for p in patterns)
        ]
        if extra:
            # Each under its own path, where the check for undeclared fields reported it.
            return [((*path, k), "unknown field") for k in extra]
    return [(path, _human(error))]


def _human(error: ValidationError) -> str:
    v = error.validator_value
    match error.validator:
        case "type":
            names = v if isinstance(v, list) else [v]
            return "must be " + " or ".join(_TYPE_WORDS.get(str(n), str(n)) for n in names)
        case "enum":
            return _one_of(v)
        case "const":
            return f"must be {_fmt(v)}"
        case "minimum":
            return f"must be at least {_fmt(v)}"
        case "maximum":
            return f"must be at most {_fmt(v)}"
        case "exclusiveMinimum":
            return f"must be greater than {_fmt(v)}"
        case "exclusiveMaximum":
            return f"must be less than {_fmt(v)}"
        case "multipleOf":
            return f"must be a multiple of {_fmt(v)}"
        case "minLength":
            return "must not be empty" if v == 1 else f"must be at least {v} characters"
        case "maxLength":
            return f"must be at most {v} character{'' if v == 1 else 's'}"
        case "pattern":
            return f"must match the pattern {v}"
        case "format":
            return f"must be a valid {v}"
        case "minItems":
            return f"must have at least {v} item{'' if v == 1 else 's'}"
        case "maxItems":
            return f"must have at most {v} item{'' if v == 1 else 's'}"
        case "uniqueItems":
            return "must not contain duplicates"
        case "anyOf" | "oneOf":
            return "does not match any of the allowed forms"
    return str(error.message)


def _one_of(values: Iterable[Any]) -> str:
    return "must be one of: " + ", ".join(_option(v) for v in values)


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return _option(value)


def _locate(
    fields: Mapping[tuple[str, ...], str], path: tuple[Any, ...], message: str
) -> tuple[str, str]:
    """The field an error at ``path`` belongs to, and the message with the place inside it."""
    for size in range(len(path), -1, -1):
        name = fields.get(tuple(path[:size]))
        if name is not None:
            rest = path[size:]
            return (name, f"{_where(rest)}: {message}" if rest else message)
    return ("", f"{_where(path)}: {message}" if path else message)


def _where(path: Sequence[Any]) -> str:
    out = ""
    for part in path:
        name = _escape(str(part))
        out += f"[{part}]" if isinstance(part, int) else f".{name}" if out else name
    return out
