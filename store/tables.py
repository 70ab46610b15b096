"""The database tables. The migrations in `store/migrations` must produce exactly this schema
(a test compares them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base as Base
from pizzabot.store.tables_base import UtcDateTime as UtcDateTime


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    skill: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), index=True)
    input: Mapped[str] = mapped_column(Text)
    trigger: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    result: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    cost_known: Mapped[bool] = mapped_column(Boolean, default=True)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None]
    budget_extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    killed_by: Mapped[str | None] = mapped_column(String(200))
    idempotency_key: Mapped[str | None] = mapped_column(String(300), unique=True)
    #: The newest event's `seq`: appending bumps it in the same fenced UPDATE that checks the
    #: lease, so numbering an event never needs a `max(seq)` query or a retry.
    last_seq: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))

    # Claims take the oldest run first. Not `updated_at`: every step's usage bumps it, and an
    # indexed column changing makes each of those updates non-HOT on PostgreSQL (migration 0005).
    __table_args__ = (Index("ix_runs_status_created", "status", "created_at"),)


class EventRow(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    at: Mapped[datetime]
    version: Mapped[int] = mapped_column(Integer)

    __table_args__ = (Index("ux_events_run_seq", "run_id", "seq", unique=True),)


class ItemRow(Base):
    __tablename__ = "items"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    skill: Mapped[str] = mapped_column(String(200))
    box: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    title: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]
    call_id: Mapped[str | None] = mapped_column(String(200))
    tool: Mapped[str | None] = mapped_column(String(300))
    args: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    schema: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    risk: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    decided_by: Mapped[str | None] = mapped_column(String(300))
    decided_via: Mapped[str | None] = mapped_column(String(32))
    decided_at: Mapped[datetime | None]
    final_args: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    reason: Mapped[str | None] = mapped_column(Text)
    read_at: Mapped[datetime | None]
    secret: Mapped[str] = mapped_column(String(64))
    #: Bumped by every change to what the item's card shows (`pizzabot.agent.card_digest`).
    version: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    requested_by: Mapped[str | None] = mapped_column(String(300))
    requester_person: Mapped[str | None] = mapped_column(String(300))
    #: A `notify` FYI's Undo (`pizzabot.agent.model.Undo`) and its state, the column the
    #: conditional update that takes it at most once looks at.
    undo: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    undo_state: Mapped[str | None] = mapped_column(String(16))

    # Lists (the inbox, the approval clock's pages) are by box and status, newest first.
    __table_args__ = (Index("ix_items_box_status_created", "box", "status", "created_at", "id"),)


class DeliveryRow(Base):
    __tablename__ = "deliveries"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[str] = mapped_column(String(32))
    channel: Mapped[str] = mapped_column(String(32))
    address: Mapped[str] = mapped_column(String(300))
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    ref: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    external_id: Mapped[str | None] = mapped_column(String(500))
    last_error: Mapped[str | None] = mapped_column(Text)
    needs_update: Mapped[bool] = mapped_column(Boolean, default=False)
    next_attempt_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    __table_args__ = (
        Index("ix_deliveries_due", "status", "next_attempt_at"),
        Index("ix_deliveries_external", "channel", "external_id"),
        # The deliveries the outbox still has work on: a few, however many were sent
        # before, so its look reads them alone (`pizzabot.store.outbox.OUTBOX_WORK`).
        Index(
            "ix_deliveries_work",
            "channel",
            "created_at",
            sqlite_where=text("status = 'pending' OR needs_update = 1"),
            postgresql_where=text("status = 'pending' OR needs_update = true"),
        ),
    )


class AuditRow(Base):
    __tablename__ = "audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime]
    action: Mapped[str] = mapped_column(String(64))
    actor: Mapped[str] = mapped_column(String(300))
    channel: Mapped[str] = mapped_column(String(32))
    run_id: Mapped[str | None] = mapped_column(String(32))
    item_id: Mapped[str | None] = mapped_column(String(32))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The chain (store/chain.py): the row's place in it, the hash of the row before, its own.
    seq: Mapped[int] = mapped_column(BigInteger)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class SwitchRow(Base):
    """Named server-wide switches that must survive a restart (the kill switch)."""

    __tablename__ = "switches"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime]


# The other tables join the same metadata, so the migrations' check sees the whole schema.
import pizzabot.store.tables_approvals  # noqa: E402
import pizzabot.store.tables_audit  # noqa: E402
import pizzabot.store.tables_away  # noqa: E402
import pizzabot.store.tables_grants  # noqa: E402
import pizzabot.store.tables_mail  # noqa: E402
import pizzabot.store.tables_mcp  # noqa: E402
import pizzabot.store.tables_phone  # noqa: E402
import pizzabot.store.tables_requests  # noqa: E402
import pizzabot.store.tables_tokens  # noqa: E402
import pizzabot.store.tables_triggers  # noqa: E402,F401
