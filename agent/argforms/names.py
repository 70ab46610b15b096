"""Field names: a property path as one string, and back.

Every channel keys its inputs by these names (HTML input names, Slack block ids, email
``name: value`` lines), so a property's path must survive the round trip unchanged. Nested
objects join with dots (``address.city``); a dot inside one property's own name is written
``\\.``, so a property called ``address.city`` is the field ``address\\.city`` and cannot be
taken for ``city`` inside ``address``. A backslash just before a dot, another backslash or
the name's end is doubled; any other stays as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["escape_name", "field_name", "field_path"]


def field_name(path: Sequence[str]) -> str:
    """The field name of a property path: its names joined by dots, each dot inside a name
    written ``\\.`` (``("address", "city")`` is ``address.city``, ``("address.city",)`` is
    ``address\\.city``). A backslash is doubled only where it would read as an escape: before
    a dot, before another backslash, or at the end of a name."""
    return ".".join(escape_name(part) for part in path)


def escape_name(part: str) -> str:
    """One property's name as it reads inside a field name (its dots escaped)."""
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
