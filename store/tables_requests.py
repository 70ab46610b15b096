"""The requests table: requests from agents Pizza Bot does not run, each one a run of an
inbox-only skill with one Action item.

A requester's `Idempotency-Key` is unique for that requester: a repeat finds the first
request (and its body's hash tells a true repeat from a key used again for something else).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Float, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class RequestRow(Base):
    __tablename__ = "requests"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(ForeignKey("items.id", ondelete="CASCADE"), unique=True)
    skill: Mapped[str] = mapped_column(String(200))
    #: "approval" (a tool call to approve, edit or reject) or "question" (an answer).
    kind: Mapped[str] = mapped_column(String(16))
    requester: Mapped[str] = mapped_column(String(300))
    idempotency_key: Mapped[str | None] = mapped_column(String(300))
    #: SHA-256 of the request's canonical JSON.
    body_hash: Mapped[str] = mapped_column(String(64))
    callback_url: Mapped[str | None] = mapped_column(String(300))
    #: Seconds until the item expires, when the request set it.
    timeout: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime]

    __table_args__ = (
        UniqueConstraint("requester", "idempotency_key", name="uq_requests_requester_key"),
    )
