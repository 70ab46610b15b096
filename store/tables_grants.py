"""The grants table: "approve, and don't ask again for …" as rows that can be revoked.

One row per approval that asked for a grant (`item_id` is unique: a step repeated after a
crash finds the row made). Lookups go by skill and tool; a `run` grant also names its run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class GrantRow(Base):
    __tablename__ = "grants"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    skill: Mapped[str] = mapped_column(String(200))
    tool: Mapped[str] = mapped_column(String(300))
    #: As the approver chose it: "run", a duration ("1h"), "exact".
    choice: Mapped[str] = mapped_column(String(32))
    granted_by: Mapped[str] = mapped_column(String(300))
    granted_via: Mapped[str] = mapped_column(String(32))
    granted_at: Mapped[datetime]
    run_id: Mapped[str] = mapped_column(String(32))
    item_id: Mapped[str] = mapped_column(String(32), unique=True)
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    args: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    revoked_by: Mapped[str | None] = mapped_column(String(300))
    uses: Mapped[int] = mapped_column(Integer, default=0)
    last_used_at: Mapped[datetime | None]

    __table_args__ = (Index("ix_grants_skill_tool", "skill", "tool"),)
