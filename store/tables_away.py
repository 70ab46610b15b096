"""The away table: one row per person who said they are away, and who decides for them.

A row stays after its `until` (it simply no longer holds); saying one is back sets `until` to
that moment. The person's name is the key: one away state per person at a time.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class AwayRow(Base):
    __tablename__ = "away"
    person: Mapped[str] = mapped_column(String(200), primary_key=True)
    delegate: Mapped[str] = mapped_column(String(200))
    until: Mapped[datetime]
    set_by: Mapped[str] = mapped_column(String(300))
    set_at: Mapped[datetime]
