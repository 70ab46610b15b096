"""Question items: an Action item a person answers, rather than approves.

A tool a run calls may ask the person behind the run for input (MCP elicitation: a form, or a
link to open); Pizza Bot's own `ask_human` asks in words. Both become an item of kind
`ItemKind.QUESTION` and reuse the decisions every channel already sends:

- `Edit(args=values)`: accept with these values (checked against `item.schema`);
- `Approve()`: accept the proposed values as they are (they must pass the same check); for a
  link (URL mode) the person consents to it, or has done what it asked;
- `Reject(reason)`: decline — the person said no;
- `Expired` (no one answered in time) or the item `CANCELLED` (the run ended): cancel.

So the item's status says the answer: EDITED/APPROVED accepted, REJECTED declined,
EXPIRED/CANCELLED cancelled (`answer_of`). An accepted form carries the schema's
`default` for every field the answer left out (`with_defaults`). A form question's `item.schema` is a flat object
(`check_schema` says what is allowed: text with a format, numbers, yes/no, choices with or
without titles, several choices); `item.args` holds the proposed values. A link question has
no schema and `item.args == {"url": ...}` (`question_url`). Channels that read a typed reply
(`field: value` lines in an email) turn it into values with `values_from_lines`.

How a running tool call asks and waits is `pizzabot.agent.asking`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pizzabot.agent.argforms import coerce_form, form_fields, validate_arguments
from pizzabot.agent.model import Item, ItemKind, ItemStatus

__all__ = [
    "FREE_TEXT_SCHEMA",
    "MAX_SCHEMA_BYTES",
    "MAX_URL",
    "Answer",
    "Link",
    "Question",
    "answer_of",
    "check_schema",
    "is_question",
    "link_domain",
    "link_refusal",
    "question_url",
    "read_link",
    "registrable_domain",
    "validate_answer",
    "values_from_lines",
    "with_defaults",
]

#: The schema of a question asked in words (`ask_human` without a schema): one text answer.
FREE_TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "title": "Answer"}},
    "required": ["answer"],
}

#: A requested schema larger than this (as JSON) is refused: it is drawn on every card.
MAX_SCHEMA_BYTES = 32_000
MAX_FIELDS = 40
MAX_OPTIONS = 100

#: The string formats a form can ask for.
FORMATS = frozenset({"email", "uri", "date", "date-time"})

_COMMON = frozenset({"type", "title", "description", "default"})
_ALLOWED: dict[str, frozenset[str]] = {
    "string": _COMMON | {"format", "minLength", "maxLength", "enum", "enumNames", "oneOf", "anyOf"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "array": _COMMON | {"items", "minItems", "maxItems", "uniqueItems"},
}


@dataclass(frozen=True)
class Answer:
    """A question's answer as MCP's elicitation result says it: `accept` with the values
    (None for a link), `decline` (the person said no) or `cancel` (dismissed, timed out, or
    the run ended)."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


@dataclass(frozen=True)
class Question:
    """What a running tool asks a person: a form (`schema`, with `proposed` values) or a
    link to open (`url`); `message` says why."""

    message: str
    schema: dict[str, Any] | None = None
    url: str | None = None
    proposed: dict[str, Any] = field(default_factory=dict)


def is_question(item: Item) -> bool:
    return item.kind is ItemKind.QUESTION


def question_url(item: Item) -> str | None:
    """The link of a URL-mode question (None for a form question or another item)."""
    if item.kind is not ItemKind.QUESTION or item.schema is not None:
        return None
    url = (item.args or {}).get("url")
    return url if isinstance(url, str) else None


@dataclass(frozen=True)
class Link:
    """A question's link as a browser opens it (read by the WHATWG URL Standard, as browsers
    read it): `href` is the address the browser goes to, `host` its host in ASCII (an
    international name as `xn--…`, so a look-alike letter shows), and `domain` the name a
    person should judge it by: the registrable domain (one label under a public suffix, by
    the Public Suffix List), or the host itself where it has none (an IP address, a bare
    suffix, `localhost`)."""

    href: str
    host: str
    domain: str

    @property
    def where(self) -> str:
        """The domain, with the host after it when the two differ."""
        return self.domain if self.domain == self.host else f"{self.domain} (host {self.host})"


MAX_URL = 2000


@functools.cache
def _suffixes() -> Any:
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


def registrable_domain(name: str) -> str | None:
    """The domain a registrant controls (`mail.corp.co.uk` → `corp.co.uk`), by the Public
    Suffix List; None for a public suffix itself (`co.uk`, `github.io`)."""
    found: str | None = _suffixes().privatesuffix(name.lower().rstrip("."))
    return found


def read_link(url: str) -> Link | str:
    """The link a URL-mode question offers, or why it cannot be offered.

    Refused: more than `MAX_URL` characters; spaces or control characters; a backslash
    (browsers read it as `/`, so `https://evil.test\\@bank.example/` opens evil.test);
    anything but `https://`; a user name or password before the host (`user@host` puts a
    trusted-looking name where the host seems to be); no host, or one a browser would not
    open."""
    if len(url) > MAX_URL:
        return f"the link is longer than {MAX_URL} characters"
    if any(c.isspace() or ord(c) < 32 or 127 <= ord(c) < 160 for c in url):
        return "the link has spaces or control characters"
    if "\\" in url:
        return "the link has a backslash, which browsers read as / (it may lead elsewhere)"
    if url[:8].lower() != "https://":
        scheme = url.partition(":")[0][:20].lower() if ":" in url else ""
        other = f" (this one is {scheme}:)" if scheme and scheme != "https" else ""
        return f"only a link starting https:// is offered{other}"
    authority = re.split(r"[/?#]", url[8:], maxsplit=1)[0]
    if "@" in authority:
        return (
            "the link has a user name or password before its host (user@host), "
            "which hides where it leads"
        )
    import ada_url

    try:
        parts = ada_url.parse_url(url)
    except ValueError:
        return "the link cannot be read as a web address"
    host = str(parts["hostname"])
    if parts["protocol"] != "https:" or not host or parts["username"] or parts["password"]:
        return "the link cannot be read as a web address with a host"
    domain = host.rstrip(".")
    if parts["host_type"] == ada_url.HostType.DEFAULT:
        domain = _suffixes().privatesuffix(domain) or domain
    return Link(href=str(parts["href"]), host=host, domain=domain)


def link_refusal(url: str) -> str | None:
    """Why a link cannot be offered to open (None: it can); see `read_link`."""
    read = read_link(url)
    return read if isinstance(read, str) else None


def link_domain(url: str) -> str | None:
    """The registrable domain a link leads to, as a card shows it in bold before the person
    opens it; None for a link that is not offered (`read_link` says why)."""
    read = read_link(url)
    return None if isinstance(read, str) else read.domain


def answer_of(item: Item) -> Answer | None:
    """The answer a decided question carries; None while it is pending."""
    match item.status:
        case ItemStatus.PENDING:
            return None
        case ItemStatus.APPROVED | ItemStatus.EDITED:
            if question_url(item) is not None:
                return Answer("accept")
            return Answer("accept", dict(item.final_args or {}))
        case ItemStatus.REJECTED:
            return Answer("decline")
        case _:
            return Answer("cancel")


def check_schema(schema: Any) -> str | None:
    """Why a requested form cannot be asked (None: it can). The form is a flat object whose
    properties are text (optionally email, uri, date or date-time), numbers, whole numbers,
    yes/no, a choice (`enum`, or `oneOf` of `const` + `title`) or several choices (an array
    of such a choice). Anything else — nested objects, references, patterns — is refused, so
    every channel can draw the form and nothing in it needs trust."""
    if not isinstance(schema, Mapping):
        return "the requested schema is not an object"
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
        return f"the requested schema is larger than {MAX_SCHEMA_BYTES} bytes"
    extra = set(schema) - {"type", "properties", "required", "title", "description", "$schema"}
    if schema.get("type") != "object" or extra:
        what = f"keywords {sorted(extra)}" if extra else "a type other than object"
        return f"the requested schema has {what}; a form is a flat object"
    props = schema.get("properties", {})
    if not isinstance(props, Mapping) or len(props) > MAX_FIELDS:
        return f"the requested schema needs properties (at most {MAX_FIELDS})"
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        return "the requested schema requires a field it does not have"
    for name, prop in props.items():
        why = _check_property(prop)
        if why is not None:
            return f"field {str(name)[:60]!r}: {why}"
    return None


def _check_property(prop: Any) -> str | None:
    if not isinstance(prop, Mapping):
        return "not a schema"
    kind = prop.get("type")
    if not isinstance(kind, str) or kind not in _ALLOWED:
        return f"type {kind!r} is not a form field (string, number, integer, boolean, array)"
    extra = set(prop) - _ALLOWED[kind]
    if extra:
        return f"keywords {sorted(extra)} are not allowed for a {kind}"
    if kind == "string":
        fmt = prop.get("format")
        if fmt is not None and fmt not in FORMATS:
            return f"format {fmt!r} is not one of {', '.join(sorted(FORMATS))}"
        return _check_choices(prop, "string")
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, Mapping) or not ({"enum", "anyOf", "oneOf"} & set(items)):
            return "a list is allowed only as several choices (items with enum or anyOf)"
        if set(items) - {"type", "enum", "anyOf", "oneOf", "enumNames"}:
            return "the choices of a list allow only type, enum and anyOf/oneOf"
        return _check_choices(items, "string")
    return None


def _check_choices(node: Mapping[str, Any], kind: str) -> str | None:
    enum = node.get("enum")
    titled = node.get("oneOf", node.get("anyOf"))
    if enum is not None:
        if not isinstance(enum, list) or not enum or len(enum) > MAX_OPTIONS:
            return f"enum must list 1 to {MAX_OPTIONS} choices"
        if not all(isinstance(v, str) for v in enum):
            return "the choices of an enum must be text"
        names = node.get("enumNames")
        if names is not None and (not isinstance(names, list) or len(names) != len(enum)):
            return "enumNames must name every choice"
    if titled is not None:
        if not isinstance(titled, list) or not titled or len(titled) > MAX_OPTIONS:
            return f"oneOf/anyOf must list 1 to {MAX_OPTIONS} choices"
        for branch in titled:
            if not isinstance(branch, Mapping) or not isinstance(branch.get("const"), str):
                return "each choice of oneOf/anyOf must be a text const (with a title)"
            if set(branch) - {"const", "title", "description"}:
                return "a choice of oneOf/anyOf has only const, title and description"
    return None


def with_defaults(schema: Mapping[str, Any] | None, values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with the schema's `default` for every field the answer leaves out (or empty).

    An asker that sends defaults means "unless the person says otherwise": the web form
    shows them filled in, but a mail reply names only the lines it changes and an API call
    only the fields it sets. Filled in here, once, where every channel's answer is built, an
    accepted form carries the same values whichever way it was answered."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    out = dict(values)
    if not isinstance(props, Mapping):
        return out
    for name, prop in props.items():
        if out.get(name) is None and isinstance(prop, Mapping) and "default" in prop:
            out[name] = prop["default"]
    return out


def validate_answer(schema: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, str]:
    """Check an answer against its question's schema, with the messages of
    `pizzabot.agent.argforms.validate_arguments`, and the formats checked even where jsonschema
    leaves them to optional packages (uri, date-time)."""
    errors = validate_arguments(schema, values)
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return errors
    for name, prop in props.items():
        value = values.get(name)
        if name in errors or not isinstance(value, str) or not isinstance(prop, Mapping):
            continue
        why = _format_error(prop.get("format"), value)
        if why is not None:
            errors[str(name)] = why
    return errors


_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})")


def _format_error(fmt: Any, value: str) -> str | None:
    if fmt == "uri":
        try:
            parts = urlsplit(value)
        except ValueError:
            parts = None
        if parts is None or not parts.scheme or any(c.isspace() for c in value):
            return "must be a full link (https://…)"
    elif fmt == "date":
        try:
            date.fromisoformat(value)
        except ValueError:
            return "must be a date: YYYY-MM-DD"
    elif fmt == "date-time":
        ok = _DATE_TIME.fullmatch(value) is not None
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            ok = False
        if not ok:
            return "must be a date and time with its zone: YYYY-MM-DDTHH:MM:SSZ (or +01:00)"
    return None


def values_from_lines(
    schema: Mapping[str, Any], text: str, proposed: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """An answer typed as `field: value` lines (an email reply, a chat message), as typed
    values and errors by field name (empty when valid).

    A field is named by its name or its title, case ignored; lines that name no field are
    ignored, and fields not given keep the proposed values. Each value is read as the web
    form reads it (`pizzabot.agent.argforms.coerce_form`): `yes`/`no` for yes/no, a choice by its value
    or its title, several choices separated by commas (or as a JSON list). A question with a
    single text field takes the whole text when no line names it."""
    fields = form_fields(schema, dict(proposed or {}))
    by_key = {f.name.casefold(): f for f in fields} | {f.label.casefold(): f for f in fields}
    raw: dict[str, str | bool | None] = {f.name: f.value for f in fields}
    named = False
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        found = by_key.get(key.strip().casefold()) if sep else None
        if found is not None:
            raw[found.name] = value.strip()
            named = True
    text_fields = [f for f in fields if f.kind in ("text", "textarea")]
    if not named and len(fields) == 1 and text_fields and text.strip():
        raw[fields[0].name] = text.strip()
    values, errors = coerce_form(schema, raw)
    for name, message in validate_answer(schema, values).items():
        errors.setdefault(name, message)
    return values, errors
