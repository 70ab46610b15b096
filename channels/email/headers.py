"""Header values the bot writes, cleaned and folded here rather than by `email`.

Much of what ends up in a header comes from outside: a run's input (the subject), a skill
or tool name, the Subject and Message-ID of a mail the bot answers. Some Python builds
(CVE-2024-6923) write an RFC 2047 encoded word that decodes to CR/LF as a raw header line,
so a subject like ``=?utf-8?q?Hi=0D=0ABcc:_x@evil?=`` would add a header, and a decoded
CR/LF makes `email` raise instead. The project does not rely on the stdlib here:

- `clean` decodes encoded words, drops every control character and line separator, and
  defuses whatever could still read as an encoded word, so the text is one plain line;
- `unstructured`, `mailbox`, `msg_ids` and `atom` build a `Folded` value: the header's
  whole line, folded (and RFC 2047-encoded where it is not ASCII) here. `email.policy`
  stores a value with a `name` as it is and writes its own `fold()`, so the bytes on the
  wire are the ones built here.

A value that cannot be made safe (an address or Message-ID with the wrong shape) raises
`HeaderError`: it is never written.
"""

from __future__ import annotations

import base64
import re
import unicodedata
from email.policy import Policy
from email.policy import default as _default_policy

_MAX_LINE = 78
_MAX_TEXT = 200
# RFC 5322 dot-atom local part and a host name; ASCII only (the bot writes no SMTPUTF8).
_ADDRESS = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
)
_MSG_ID = re.compile(r"<[\x21-\x3b\x3d\x3f-\x7e]+>")  # printable ASCII but < and >
_ATOM = re.compile(r"[\x20-\x7e]+")


class HeaderError(ValueError):
    """A header value that cannot be written safely."""


class Folded(str):
    """A header value whose line was built here. As a `str` it is the readable text."""

    name: str
    defects: tuple[object, ...] = ()
    _lines: tuple[str, ...]

    def __new__(cls, name: str, text: str, lines: list[str]) -> Folded:
        value = super().__new__(cls, text)
        value.name = name
        value._lines = tuple(lines)
        return value

    def fold(self, *, policy: Policy) -> str:
        """The header as `email`'s generator writes it (ASCII, lines of at most 78)."""
        return f"{self.name}: " + (policy.linesep + " ").join(self._lines) + policy.linesep


def _decode_words(text: str) -> str:
    """What a reader (and `email` itself) would make of the encoded words in `text`."""
    try:
        return str(_default_policy.header_factory("x-text", text))
    except Exception:  # a malformed word: keep the text, it is cleaned anyway
        return text


def _plain(text: str) -> str:
    out = []
    for ch in text:
        category = unicodedata.category(ch)
        # Cc: C0, DEL and C1 (NEL too); Zl/Zp: U+2028/U+2029, which splitlines() breaks on.
        out.append(" " if category in {"Cc", "Zl", "Zp"} else ch)
    return " ".join("".join(out).split())


def clean(text: str, *, limit: int = _MAX_TEXT) -> str:
    """One line of plain text for a header: decoded, no control characters, nothing left
    that could read as an encoded word, at most `limit` characters."""
    plain = _plain(text)
    for _ in range(3):  # an encoded word may decode to another one
        decoded = _plain(_decode_words(plain))
        if decoded == plain:
            break
        plain = decoded
    plain = plain.replace("=?", "= ?")
    if len(plain) > limit:
        plain = plain[: limit - 1].rstrip() + "…"
    return plain


def _encoded_words(text: str, first: int) -> list[str]:
    """`text` as RFC 2047 `B` words, each fitting a folded line (`first`: room on line 1)."""
    words: list[str] = []
    chunk = b""
    room = max(first, 20)
    for ch in text:
        data = ch.encode()
        # 12 characters of framing; base64 grows 3 bytes into 4 characters.
        if chunk and 12 + (len(chunk) + len(data) + 2) // 3 * 4 > room:
            words.append(_word(chunk))
            chunk = b""
            room = _MAX_LINE - 1
        chunk += data
    if chunk or not words:
        words.append(_word(chunk))
    return words


def _word(data: bytes) -> str:
    return f"=?utf-8?b?{base64.b64encode(data).decode()}?="


def _fold_words(name: str, words: list[str]) -> list[str]:
    """Join `words` with spaces into lines of at most 78 characters (with the name)."""
    lines: list[str] = []
    line = ""
    width = _MAX_LINE - len(name) - 2
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line, width = "", _MAX_LINE - 1
        line = f"{line} {word}" if line else word
    lines.append(line)
    return lines


def unstructured(name: str, text: str) -> Folded:
    """A free-text header (Subject) from any text."""
    value = clean(text)
    if value.isascii():
        lines = _fold_words(name, value.split(" "))
    else:
        lines = _fold_words(name, _encoded_words(value, _MAX_LINE - len(name) - 2))
    return Folded(name, value, lines)


def address(value: str) -> str:
    """A plain ASCII addr-spec, or `HeaderError`."""
    text = value.strip()
    if len(text) > 254 or not _ADDRESS.fullmatch(text):
        raise HeaderError(f"not a mail address the bot writes: {text[:80]!r}")
    return text


def mailbox(name: str, addr: str, display: str = "") -> Folded:
    """An address header with one mailbox (From, To, Reply-To): `"Display" <addr>`."""
    spec = address(addr)
    shown = clean(display, limit=64)
    if not shown:
        return Folded(name, spec, [spec])
    if shown.isascii():
        quoted = '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'
        words = [quoted]
    else:
        words = _encoded_words(shown, _MAX_LINE - len(name) - 2)
    lines = _fold_words(name, [*words, f"<{spec}>"])
    return Folded(name, f"{shown} <{spec}>", lines)


def msg_id(value: str) -> str:
    """One Message-ID as `<...>`, or `HeaderError`."""
    text = value.strip()
    if len(text) > 250 or not _MSG_ID.fullmatch(text):
        raise HeaderError(f"not a Message-ID the bot writes: {text[:80]!r}")
    return text


def msg_ids(name: str, values: list[str]) -> Folded:
    """Message-ID, In-Reply-To, References: checked ids, folded between ids."""
    ids = [msg_id(v) for v in values]
    if not ids:
        raise HeaderError(f"{name} needs a Message-ID")
    return Folded(name, " ".join(ids), _fold_words(name, ids))


def atom(name: str, value: str) -> Folded:
    """A short header of the bot's own making (Date, ids, Auto-Submitted): printable ASCII."""
    if len(value) > 200 or not _ATOM.fullmatch(value):
        raise HeaderError(f"{name}: not a value the bot writes: {value[:80]!r}")
    return Folded(name, value, [value])


__all__ = [
    "Folded",
    "HeaderError",
    "address",
    "atom",
    "clean",
    "mailbox",
    "msg_id",
    "msg_ids",
    "unstructured",
]
