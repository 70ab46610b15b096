"""Durations as a skill file writes them ("30s", "15m", "2h", "1d", or seconds)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(value: str | float | int) -> float:
    """Seconds in "90", "30s", "15m", "2h" or "1d"."""
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a duration like 30s, 15m, 2h or 1d")
    return float(match.group(1)) * _UNIT[match.group(2)]


Duration = Annotated[float, Field(ge=0)]
