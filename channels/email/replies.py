"""Reading a person's answer out of a reply mail, whatever client wrote it.

Replies carry far more than the answer: the quoted original ("On … wrote:", Outlook's
"From: … Sent:" block, `>` lines), signatures ("-- ", "Sent from my iPhone"), HTML-only
bodies, quoted-printable or base64 transfer encodings and any charset. `body_text` turns a
message into text, `top_of_reply` keeps what the person wrote above the quote, and
`parse_command` reads the decision from its first line:

    approve | yes | ok | lgtm            -> Command("approve")
    reject <reason, may go on for lines> -> Command("reject", reason=...)
    edit + `name: value` lines or JSON   -> Command("edit", values=..., typed=...)

Pure functions: no I/O, so the corpus in tests/fixtures/replies pins them down.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Literal

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


_BLOCK_OPEN = re.compile(r"<(div|p)\b[^>]*>", re.IGNORECASE)
_BLOCK_CLOSE = re.compile(r"</(div|p)\s*>", re.IGNORECASE)


def html_to_text(html: str) -> str:
    import html2text

    # Mail editors write one <div> (Gmail, Apple) or <p> (Outlook) per line, and an empty
    # line as <div><br></div>; html2text would put a paragraph gap after each. As line
    # breaks they keep an edit's "name: value" lines together, as the person typed them.
    html = _BLOCK_CLOSE.sub("<br>", _BLOCK_OPEN.sub("", html))
    converter = html2text.HTML2Text()
    converter.body_width = 0  # no re-wrapping: an edited value must stay one line
    converter.ignore_links = True  # "bob@x" not "[bob@x](mailto:bob@x)"
    converter.ignore_images = True
    converter.ignore_emphasis = True
    converter.ignore_tables = True
    text: str = converter.handle(html)
    return "\n".join(line.rstrip() for line in text.splitlines())


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

# "On <date>, <name> wrote:" in the languages mail clients most often use; Gmail may wrap
# it over two or three lines, so these are matched against up to three joined lines.
_ATTRIBUTION = [
    re.compile(p, re.IGNORECASE | re.DOTALL)
    for p in (
        r"^\s*on\b.{0,300}\bwrote\s*:\s*$",
        r"^\s*am\b.{0,300}\bschrieb\b.{0,200}:\s*$",
        r"^\s*le\b.{0,300}\ba\s+écrit\s*:\s*$",
        r"^\s*el\b.{0,300}\bescribió\s*:\s*$",
        r"^\s*il\b.{0,300}\bha\s+scritto\s*:\s*$",
        r"^\s*op\b.{0,300}\bschreef\b.{0,200}:\s*$",
        r"^\s*\d{4}[-/.]\d{1,2}[-/.]\d{1,2}.{0,200}<[^>]+@[^>]+>\s*:\s*$",
    )
]
_SEPARATOR = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^\s*-{2,}\s*original message\s*-{2,}\s*$",
        r"^\s*-{2,}\s*(forwarded|weitergeleitete) (message|nachricht)\s*-{2,}\s*$",
        r"^\s*-{2,}\s*ursprüngliche nachricht\s*-{2,}\s*$",
        r"^\s*_{8,}\s*$",  # Outlook's rule above its header block
        r"^\s*(\*\s*){3}$",  # an HTML <hr> after html2text
        r"^\s*begin forwarded message:\s*$",
    )
]
_SIGNATURE = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"^-- ?$",
        r"^\s*sent from my \w+",
        r"^\s*sent from (outlook|mail for windows|yahoo mail|proton ?mail)",
        r"^\s*get outlook for \w+",
        r"^\s*von meinem \w+ gesendet",
        r"^\s*envoyé de mon \w+",
        r"^\s*enviado desde mi \w+",
    )
]
# Outlook's quoted header: "From: …" followed within a few lines by "Sent:" or "Date:"
# (bold in HTML, so "**From:**" after html2text when emphasis is kept).
_OUTLOOK_FROM = re.compile(r"^\s*\**\s*(from|von|de)\s*:\s*\**\s*\S", re.IGNORECASE)
_OUTLOOK_SENT = re.compile(
    r"^\s*\**\s*(sent|date|gesendet|datum|envoyé|enviado)\s*:", re.IGNORECASE
)


def _is_quote_start(lines: list[str], i: int) -> bool:
    line = lines[i]
    if line.lstrip().startswith(">"):
        return True
    if any(p.match(line) for p in _SEPARATOR):
        return True
    for span in (1, 2, 3):
        joined = " ".join(lines[i : i + span])
        if any(p.match(joined) for p in _ATTRIBUTION):
            return True
    if _OUTLOOK_FROM.match(line):
        return any(_OUTLOOK_SENT.match(nxt) for nxt in lines[i + 1 : i + 5])
    # Any other attribution ("* Bob <bob@x> [2026-11-30]:") right above a `>` quote.
    if line.rstrip().endswith(":") and "@" in line:
        following = [nxt for nxt in lines[i + 1 : i + 3] if nxt.strip()]
        return bool(following) and following[0].lstrip().startswith(">")
    return False


def _is_signature(line: str) -> bool:
    return any(p.match(line) for p in _SIGNATURE)


def _strip_blank(lines: list[str]) -> str:
    return "\n".join(lines).strip("\n").strip()


def top_of_reply(text: str) -> str:
    """What the person wrote above the quoted mail and their signature.

    A bottom-posted reply (quote first, answer below) has nothing above the quote; then the
    first unquoted block after the quote is the answer.
    """
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    top: list[str] = []
    quote_at: int | None = None
    for i, line in enumerate(lines):
        if _is_signature(line):
            return _strip_blank(top)
        if _is_quote_start(lines, i):
            quote_at = i
            break
        top.append(line)
    if _strip_blank(top) or quote_at is None:
        return _strip_blank(top)
    # Bottom-posting is a `>`-quote habit; below an Outlook header block is only more quote.
    rest = lines[quote_at:]
    while rest and not rest[0].lstrip().startswith(">"):
        if rest[0].strip() and not _is_quote_start(rest, 0):
            return ""
        rest.pop(0)
    below: list[str] = []
    for line in rest:
        if line.lstrip().startswith(">") and not below:
            continue
        if not below and not line.strip():
            continue
        if line.lstrip().startswith(">") or _is_signature(line) or _is_quote_start([line], 0):
            break
        below.append(line)
    return _strip_blank(below)


# --- the answer -> a command -------------------------------------------------------------

_APPROVE_WORDS = frozenset({"approve", "approved", "yes", "ok", "okay", "lgtm"})
_REJECT_WORDS = frozenset({"reject", "rejected", "deny", "denied"})
_EDIT_WORDS = frozenset({"edit"})
_FIRST_WORD = re.compile(r"^\s*(?P<word>[A-Za-z]+)\b(?P<rest>.*)$", re.DOTALL)
# After "approve", only punctuation, a thumbs-up or a courtesy word may follow on its line.
_APPROVE_TAIL = re.compile(
    r"^[\s.!,:;\-–—👍✅✔️]*(please|thanks|thank you|thx)?[\s.!👍✅✔️]*$", re.IGNORECASE
)
_GREETING = re.compile(r"^\s*(hi|hello|hey|dear|hallo|bonjour|hola)\b[^\n]{0,40}$", re.IGNORECASE)
_FIELD_LINE = re.compile(r"^\s*(?:[-*•]\s*)?(?P<name>[A-Za-z_][\w.\-]*)\s*[:=]\s?(?P<value>.*)$")
_FENCE = re.compile(r"^\s*```[\w-]*\s*$")


@dataclass(frozen=True)
class Command:
    """A decision read from a reply. For an edit, `values` are the fields the person sent:
    strings from `name: value` lines (`typed=False`, to coerce with the tool's schema) or
    JSON values (`typed=True`). `problem` says why an edit could not be read."""

    kind: Literal["approve", "reject", "edit"]
    reason: str = ""
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
        return Command("approve") if _APPROVE_TAIL.match(rest) else None
    if word in _REJECT_WORDS:
        reason = "\n".join(_drop_sign_off([rest.lstrip(" \t:,-–—."), *lines[1:]])).strip()
        return Command("reject", reason=reason)
    if word in _EDIT_WORDS:
        return _parse_edit("\n".join([rest.lstrip(" \t:,-–—"), *lines[1:]]))
    return None


_SIGN_OFF = re.compile(
    r"^\s*(thanks|thank you|thx|cheers|best|regards|kind regards|best regards|br|"
    r"greetings|gruß|grüße|viele grüße|merci|cordialement|saludos)\b[\s,.!]*$",
    re.IGNORECASE,
)


def _drop_sign_off(lines: list[str]) -> list[str]:
    """Without a closing "Thanks,\nAlice": the agent should read the reason, not the manners."""
    for i in range(len(lines) - 1, -1, -1):
        if _SIGN_OFF.match(lines[i]) and len(lines) - i <= 3:
            return lines[:i]
    return lines


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
            value, _end = json.JSONDecoder().raw_decode(body)
        except json.JSONDecodeError as exc:
            return Command(
                "edit",
                problem=f"the JSON object could not be read: {exc.msg} "
                f"(line {exc.lineno}, column {exc.colno})",
            )
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
