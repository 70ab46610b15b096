"""Secrets out of the text a run stores.

A provider's error can echo the API key it was given ("Incorrect API key provided: sk-…"),
and a tool's failure can print a token from its own configuration. Whatever such text
becomes — a run's error, an event, an inbox note, a trace made from the events, a Slack
message or a mail — is kept and shown, so it is redacted before it is stored.

A :class:`Redactor` replaces two things with ``[redacted]``:

- the secret values it was given (the server's tokens and passwords, which ``bot`` hands
  over, and the API key a model call used), wherever they appear;
- text shaped like a well-known credential: ``sk-…``, ``xoxb-…``, ``xapp-…``, ``ghp_…``,
  ``AKIA…``, ``AIza…``, a JWT, ``Bearer …``, ``api_key=…``/``password: …``, and the password
  in a URL's ``user:password@``.

Values shorter than :data:`MIN_SECRET_LENGTH` characters are not matched by value: replacing
every "x" of a text helps nobody, and real keys are long. Shapes still apply to them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["MIN_SECRET_LENGTH", "REDACTED", "Redactor"]

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8

# Each pattern keeps its group 1 (a scheme or a name) and replaces the rest.
_SHAPES = [
    re.compile(r"()\b(?:sk|pk|rk)-[A-Za-z0-9_-]{8,}"),
    re.compile(r"()\b[sr]k_(?:live|test)_[A-Za-z0-9]{8,}"),
    re.compile(r"()\bx(?:ox[abposre]|app)-[A-Za-z0-9-]{8,}"),
    re.compile(r"()\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"()\bglpat-[A-Za-z0-9_-]{20,}"),
    re.compile(r"()\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"()\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"()\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"(\b(?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE),
    re.compile(
        r"""((?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|client[_-]?secret"""
        r"""|password|passwd|pwd)["']?\s*[:=]\s*["']?)(?!\[redacted\])[^\s"'&,;]{4,}""",
        re.IGNORECASE,
    ),
    re.compile(r"([?&]key=)[^\s&\"']{8,}"),
    re.compile(r"(://[^/\s:@]+:)[^/\s@]+(?=@)"),
]


@dataclass(frozen=True)
class Redactor:
    """Redacts the given secret values and well-known credential shapes from text.

    ``Redactor()`` knows no values and still removes the shapes. Build one with
    :meth:`of`, which drops empty and short values.
    """

    values: tuple[str, ...] = ()

    @classmethod
    def of(cls, *values: str | None) -> Redactor:
        return cls(()).with_values(values)

    def with_values(self, values: Iterable[str | None]) -> Redactor:
        """This redactor with more secret values (the longest are replaced first, so a
        secret that contains another is not left half shown)."""
        known = set(self.values)
        known.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)
        return Redactor(tuple(sorted(known, key=len, reverse=True)))

    def values_only(self, text: str) -> str:
        """Only the given values: for a tool's normal output, whose content the model needs
        as it is (a file that mentions ``password=`` is not a leak of ours)."""
        for value in self.values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def __call__(self, text: str) -> str:
        text = self.values_only(text)
        for shape in _SHAPES:
            text = shape.sub(lambda m: m.group(1) + REDACTED, text)
        return text
