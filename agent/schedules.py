"""Runs started by the clock and by webhooks, as the store keeps them: a schedule's record,
each fire of it, and the signatures of webhooks already accepted.

The scheduler and the webhook receiver (`pizzabot.channels.triggers`) program against these
protocols; `pizzabot.store.triggers` implements them. Every "at most once" is the store's: one fire
per (schedule, fire time), one accepted request per webhook signature, across restarts and
across servers sharing the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

__all__ = [
    "FireOutcome",
    "FireRecord",
    "HookSignatures",
    "ScheduleRecord",
    "ScheduleStore",
]

#: What recording one fire of a schedule came to: this process fires it ("claimed"), another
#: already did ("duplicate"), or the schedule is paused or gone.
FireOutcome = Literal["claimed", "duplicate", "paused", "missing"]


@dataclass(frozen=True)
class ScheduleRecord:
    id: str
    skill: str
    source: str  # "skill" | "api"
    cron: str | None
    every_seconds: float | None
    input: str
    timezone: str
    misfire: str  # "skip" | "run_once"
    paused: bool
    created_at: datetime
    updated_at: datetime
    active_since: datetime


@dataclass(frozen=True)
class FireRecord:
    schedule_id: str
    fire_time: datetime
    status: str  # claimed | started | skipped | refused | failed
    run_id: str | None
    detail: str | None
    created_at: datetime
    updated_at: datetime


class ScheduleStore(Protocol):
    """Schedules and their fires."""

    async def sync_skill_schedules(self, wanted: Sequence[ScheduleRecord]) -> None:
        """Make the schedules that come from skill files exactly `wanted`."""
        ...

    async def add_schedule(self, rec: ScheduleRecord) -> ScheduleRecord: ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord:
        """The schedule, or `NotFound`."""
        ...

    async def list_schedules(self) -> list[ScheduleRecord]: ...

    async def set_paused(
        self, schedule_id: str, *, paused: bool, now: datetime
    ) -> ScheduleRecord: ...

    async def delete_schedule(self, schedule_id: str) -> None: ...

    async def fire_once(
        self,
        schedule_id: str,
        fire_time: datetime,
        *,
        now: datetime,
        status: str = "claimed",
        detail: str | None = None,
    ) -> FireOutcome:
        """Record one fire of a schedule, once across every server."""
        ...

    async def finish_fire(
        self,
        schedule_id: str,
        fire_time: datetime,
        *,
        status: str,
        now: datetime,
        run_id: str | None = None,
        detail: str | None = None,
    ) -> None: ...

    async def last_fires(self) -> dict[str, FireRecord]:
        """The latest fire of every schedule that has fired."""
        ...

    async def fires(self, schedule_id: str, *, limit: int = 20) -> list[FireRecord]: ...

    async def unfinished_fires(self, *, before: datetime) -> list[FireRecord]:
        """Fires claimed before `before` whose run was never recorded (the process died)."""
        ...


class HookSignatures(Protocol):
    """The webhook signatures already accepted: each is accepted once."""

    async def accept_signature(
        self, signature: str, *, hook: str, expires_at: datetime, now: datetime
    ) -> bool:
        """Record a signature as used; False when it was used before (a replay)."""
        ...

    async def forget_signature(self, signature: str) -> None:
        """Let a signature be used again (its request was not acted on)."""
        ...
