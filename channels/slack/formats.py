"""Slack's own inputs for text fields with a JSON Schema `format`: email, URL, date, date and
time. Slack checks what people type in these (and offers a calendar), where a plain text input
would take anything.

A form's value is text (`pizzabot.agent.argforms`); these inputs hold other shapes: a date picker a
`YYYY-MM-DD` date, a date-and-time picker seconds since the epoch. So a value is prefilled
only when the input can show it, and a proposed value it cannot show (a model's "next
Tuesday" in a date field) keeps a plain text input instead, rather than being dropped. What
people pick is turned back into the text the schema asks for: a date as `YYYY-MM-DD`, a date
and time as RFC 3339 in UTC (`2026-12-01T09:30:00Z`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from pizzabot.agent.argforms import Field

__all__ = ["FORMAT_INPUTS", "format_element", "format_value"]

#: The element types this module builds, by the state Slack reports them with.
FORMAT_INPUTS = frozenset({"email_text_input", "url_text_input", "datepicker", "datetimepicker"})

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_URL = re.compile(r"https?://\S+", re.IGNORECASE)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_URL_MAX = 3000  # what a Slack text input holds


def _date(value: str) -> str | None:
    if not _DATE.fullmatch(value):
        return None
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        return None


def _epoch(value: str) -> int | None:
    """Seconds since the epoch of an RFC 3339 date and time that names its offset."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("z", "Z"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None  # a time without an offset is no instant: keep it as text
    seconds = int(moment.timestamp())
    return seconds if 0 <= seconds < 2**31 else None


def format_element(field: Field, action_id: str) -> dict[str, Any] | None:
    """Slack's input for `field`'s format, or None when a plain text input fits better (no
    format Slack has an input for, or a proposed value that input could not show)."""
    value = field.value if isinstance(field.value, str) and field.value else None
    element: dict[str, Any]
    match field.format:
        case "email":
            if value is not None and not _EMAIL.fullmatch(value):
                return None
            element = {"type": "email_text_input", "action_id": action_id}
            if value is not None:
                element["initial_value"] = value
        case "uri" | "url":
            if value is not None and not (_URL.fullmatch(value) and len(value) <= _URL_MAX):
                return None
            element = {"type": "url_text_input", "action_id": action_id}
            if value is not None:
                element["initial_value"] = value
        case "date":
            shown = _date(value) if value is not None else None
            if value is not None and shown is None:
                return None
            element = {"type": "datepicker", "action_id": action_id}
            if shown is not None:
                element["initial_date"] = shown
        case "date-time":
            seconds = _epoch(value) if value is not None else None
            if value is not None and seconds is None:
                return None
            element = {"type": "datetimepicker", "action_id": action_id}
            if seconds is not None:
                element["initial_date_time"] = seconds
        case _:
            return None
    return element


def format_value(entry: Mapping[str, Any]) -> str | None:
    """The text of a submitted format input (None: left empty)."""
    match entry.get("type"):
        case "datepicker":
            picked = entry.get("selected_date")
            return str(picked) if picked else None
        case "datetimepicker":
            seconds = entry.get("selected_date_time")
            if not isinstance(seconds, int | float) or isinstance(seconds, bool):
                return None
            moment = datetime.fromtimestamp(int(seconds), tz=UTC)
            return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    value = entry.get("value")
    return None if value is None else str(value)
