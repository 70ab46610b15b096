"""What starts a skill's runs or messages on their own: schedules, webhooks (hooks) and
the hour of the daily digest."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator, Field, field_validator

from pizzabot.agent.skills._base import Strict
from pizzabot.agent.skills.durations import Duration, parse_duration


def _known_zone(v: str) -> str:
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {v!r} (use a name like Europe/Amsterdam)") from None
    return v


#: An IANA time zone's name, refused at its line when the machine does not know it.
TimeZone = Annotated[str, AfterValidator(_known_zone)]


class Schedule(Strict):
    cron: str | None = None
    every: Duration | None = None
    input: str = ""
    timezone: str = "UTC"
    misfire: Literal["skip", "run_once"] = "skip"

    @field_validator("every", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return None if v is None else parse_duration(v)


class Hook(Strict):
    name: str
    secret_env: str


class DigestAt(Strict):
    """When the daily digest goes out: `at` ("08:30", 24-hour) in `timezone`."""

    at: Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
    timezone: TimeZone = "UTC"
