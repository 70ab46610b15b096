"""The item_approvals table: each person's counted approval of an item that needs more than
one (`pizzabot.agent.policy.quorum`).

A row per counted approval; `round` is the count it belongs to (an edit starts the next), and
the unique (item, round, person) keeps a person from being counted twice in one count even
when two of their clicks race. The first row of a count an edit started keeps the arguments
that edit replaced (`edited_from`), so the decision can say what was first proposed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class ItemApprovalRow(Base):
    __tablename__ = "item_approvals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), index=True)
    round: Mapped[int] = mapped_column(Integer)
    person: Mapped[str] = mapped_column(String(300))
    channel: Mapped[str] = mapped_column(String(32))
    identity: Mapped[str] = mapped_column(String(300))
    at: Mapped[datetime]
    edited_from: Mapped[dict[str, Any] | None] = mapped_column(JSON)

    __table_args__ = (
        UniqueConstraint("item_id", "round", "person", name="uq_item_approvals_person"),
    )
