"""Reading a person's answer out of a reply mail, whatever client wrote it.

Replies carry far more than the answer: the quoted original ("On … wrote:", Outlook's
"From: … Sent:" block, `>` lines), signatures ("-- ", "Sent from my iPhone"), HTML-only
bodies, quoted-printable or base64 transfer encodings and any charset, all of it in the
writer's language. `body_text` turns a message into text (HTML through html_text),
`top_of_reply` keeps what the person wrote above the quote (quotes), and `parse_command`
reads the decision from its first line:

    approve | yes | ok | lgtm            -> Command("approve")
    approve all                          -> Command("approve", all=True): the run's turn
    reject <reason, may go on for lines> -> Command("reject", reason=...)
    edit + `name: value` lines or JSON   -> Command("edit", values=..., typed=...)

A reason is what the person typed, without their sign-off (signoffs).

Pure functions: no I/O, so the corpus in tests/fixtures/replies pins them down.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Literal

from pizzabot.agent.argforms import bounded_decoder
from pizzabot.channels.email.html_text import html_to_text
from pizzabot.channels.email.quotes import own_text
from pizzabot.channels.email.signoffs import without_sign_off

__all__ = [
    "Command",
    "UnreadableMail",
    "body_text",
    "parse_command",
    "read_reply",
    "top_of_reply",
]


class UnreadableMail(Exception):
    """The mail's text cannot be read reliably (no text part, undeclared 8-bit, bad charset)."""


# --- message -> text ---------------------------------------------------------------------


def _decode(part: EmailMessage) -> str:
    payload = part.get_payload(decode=True)
    data = payload if isinstance(payload, bytes) else b""
    charset = part.get_content_charset()
    if charset is None or charset in {"us-ascii", "ascii"}:
        if any(b > 0x7F for b in data):
            # Guessing would put wrong letters into a reason or an edited value.
            raise UnreadableMail(
                "the text has 8-bit characters but declares no charset; "
                "send it as UTF-8 (most mail programs do)"
            )
        return data.decode("ascii")
    try:
        codec = codecs.lookup(charset)
    except LookupError:
        raise UnreadableMail(f"unknown charset {charset!r}") from None
    try:
        return data.decode(codec.name)
    except UnicodeDecodeError:
        raise UnreadableMail(f"the text is not valid {charset}") from None


def body_text(msg: EmailMessage) -> str:
    """The mail's text: the plain part, else the HTML part converted to text."""
    part = msg.get_body(preferencelist=("plain", "html"))
    if not isinstance(part, EmailMessage):
        raise UnreadableMail("the mail has no text part")
    text = _decode(part)
    if part.get_content_subtype() == "html":
        text = html_to_text(text)
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\xa0", " ")


# --- text -> the part above the quote ----------------------------------------------------


def top_of_reply(text: str) -> str:
    """What the person wrote, without the quoted mail and their signature (see quotes)."""
    return own_text(text)


# --- the answer -> a command -------------------------------------------------------------

_APPROVE_WORDS = frozenset({"approve", "approved", "yes", "ok", "okay", "lgtm"})
_REJECT_WORDS = frozenset({"reject", "rejected", "deny", "denied"})
_EDIT_WORDS = frozenset({"edit"})
_FIRST_WORD = re.compile(r"^\s*(?P<word>[A-Za-z]+)\b(?P<rest>.*)$", re.DOTALL)
# After "approve", only punctuation, a thumbs-up or a courtesy word may follow on its line.
_APPROVE_TAIL = re.compile(
    r"^[\s.!,:;\-–—👍✅✔️]*(please|thanks|thank you|thx)?[\s.!👍✅✔️]*$", re.IGNORECASE
)
_ALL = re.compile(r"^\s+all\b", re.IGNORECASE)
_GREETING = re.compile(r"^\s*(hi|hello|hey|dear|hallo|bonjour|hola)\b[^\n]{0,40}$", re.IGNORECASE)
# A backslash belongs to a name: `address\.city` is a property called "address.city".
_FIELD_LINE = re.compile(
    r"^\s*(?:[-*•]\s*)?(?P<name>[A-Za-z_\\][\w.\-\\]*)\s*[:=]\s?(?P<value>.*)$"
)
_FENCE = re.compile(r"^\s*```[\w-]*\s*$")


@dataclass(frozen=True)
class Command:
    """A decision read from a reply. For an edit, `values` are the fields the person sent:
    strings from `name: value` lines (`typed=False`, to coerce with the tool's schema) or
    JSON values (`typed=True`). `problem` says why an edit could not be read."""

    kind: Literal["approve", "reject", "edit"]
    reason: str = ""
    #: `approve all`: every call of the item's run that waits with it (one model turn).
    all: bool = False
    values: dict[str, Any] = field(default_factory=dict)
    typed: bool = False
    problem: str | None = None


def parse_command(top: str) -> Command | None:
    """The decision on the first line of `top` (after an optional greeting), or None."""
    lines = top.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if len(lines) > 1 and _GREETING.match(lines[0]) and not _first_word(lines[0]):
        lines.pop(0)
        while lines and not lines[0].strip():
            lines.pop(0)
    if not lines:
        return None
    word = _first_word(lines[0])
    if word is None:
        return None
    match = _FIRST_WORD.match(lines[0])
    assert match is not None
    rest = match.group("rest")
    if word in _APPROVE_WORDS:
        every = _ALL.match(rest)
        if every is not None:
            rest = rest[every.end() :]
        return Command("approve", all=every is not None) if _APPROVE_TAIL.match(rest) else None
    if word in _REJECT_WORDS:
        reason = without_sign_off("\n".join([rest.lstrip(" \t:,-–—."), *lines[1:]]))
        return Command("reject", reason=reason)
    if word in _EDIT_WORDS:
        return _parse_edit("\n".join([rest.lstrip(" \t:,-–—"), *lines[1:]]))
    return None


def _first_word(line: str) -> str | None:
    match = _FIRST_WORD.match(line)
    if match is None:
        return None
    word = match.group("word").lower()
    if word in _APPROVE_WORDS | _REJECT_WORDS | _EDIT_WORDS:
        return word
    return None


def _parse_edit(text: str) -> Command:
    lines = [line for line in text.split("\n") if not _FENCE.match(line)]
    body = "\n".join(lines).strip()
    if body.startswith("{"):
        try:
            value, _end = bounded_decoder().raw_decode(body)
        except json.JSONDecodeError as exc:
            return Command(
                "edit",
                problem=f"the JSON object could not be read: {exc.msg} "
                f"(line {exc.lineno}, column {exc.colno})",
            )
        except ValueError as exc:  # a number out of range, bounded as a form field's is
            return Command("edit", problem=f"the JSON object could not be read: {exc}")
        if not isinstance(value, dict):
            return Command("edit", problem="the JSON must be an object of field names to values")
        return Command("edit", values=value, typed=True)
    values: dict[str, Any] = {}
    current: str | None = None
    for line in body.split("\n"):
        if not line.strip():
            if values:
                break  # a blank line ends the fields: below it is a sign-off
            continue
        found = _FIELD_LINE.match(line)
        if found:
            current = found.group("name")
            values[current] = found.group("value").strip()
        elif current is not None:
            values[current] = f"{values[current]}\n{line.rstrip()}"
    if not values:
        return Command(
            "edit",
            problem='no "name: value" lines found below "edit" (or send a JSON object)',
        )
    return Command("edit", values=values)


def read_reply(msg: EmailMessage) -> tuple[str, Command | None]:
    """The reply's own text (above the quote) and the command on its first line."""
    top = top_of_reply(body_text(msg))
    return top, parse_command(top)
