"""Tables for what starts or nudges work without a person: schedules, their fires, the
one-time timers (reminder, escalation) of an inbox item, and the memory of what may be used
only once: a webhook's signature, a web session after logout.

The unique constraints are the point: a schedule fires at most once per fire time, an item is
reminded or escalated at most once and a signature is accepted once, however many servers share
the database, because the second insert of the same key inserts nothing.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class ScheduleRow(Base):
    __tablename__ = "schedules"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    skill: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(16))  # "skill" (from its YAML) | "api"
    cron: Mapped[str | None] = mapped_column(String(200))
    every_seconds: Mapped[float | None] = mapped_column(Float)
    input: Mapped[str] = mapped_column(Text)
    timezone: Mapped[str] = mapped_column(String(64))
    misfire: Mapped[str] = mapped_column(String(16))
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # Since when missed fires count: creation, or the last resume (a pause is not a misfire).
    active_since: Mapped[datetime]


class ScheduleFireRow(Base):
    __tablename__ = "schedule_fires"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    schedule_id: Mapped[str] = mapped_column(String(64), index=True)
    fire_time: Mapped[datetime]
    status: Mapped[str] = mapped_column(
        String(16)
    )  # claimed | started | skipped | refused | failed
    run_id: Mapped[str | None] = mapped_column(String(32))
    detail: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    __table_args__ = (
        UniqueConstraint("schedule_id", "fire_time", name="ux_schedule_fires_schedule_time"),
    )


class ItemTimerRow(Base):
    __tablename__ = "item_timers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))  # remind | escalate
    at: Mapped[datetime]

    __table_args__ = (UniqueConstraint("item_id", "kind", name="ux_item_timers_item_kind"),)


class HookSignatureRow(Base):
    """A webhook signature already accepted; a replay of it inserts nothing and is refused.

    Kept until its timestamp can no longer pass the tolerance check (`expires_at`), then
    pruned."""

    __tablename__ = "hook_signatures"
    signature: Mapped[str] = mapped_column(String(64), primary_key=True)  # hex HMAC-SHA256
    hook: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(index=True)


class EndedSessionRow(Base):
    """A web session ended by logout: its cookie is refused until it would have expired."""

    __tablename__ = "web_sessions_ended"
    sid: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(index=True)
