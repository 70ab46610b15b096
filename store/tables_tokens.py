"""The tokens table: named API tokens with a scope, each kept as a hash only.

The secret is shown once, when it is made; the row keeps its SHA-256 (the secret is 32
random bytes, so a plain hash is enough to keep a stolen database from presenting it).
A revoked token keeps its row, so the audit trail's names keep meaning something.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class TokenRow(Base):
    __tablename__ = "tokens"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    #: "ask", "decide" or "admin" (`pizzabot.agent.policy.principal.Scope`).
    scope: Mapped[str] = mapped_column(String(16))
    #: The person a decide token acts as (`people:`), or None.
    person: Mapped[str | None] = mapped_column(String(200))
    #: SHA-256 of the secret, hex.
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    created_by: Mapped[str] = mapped_column(String(300))
    revoked_at: Mapped[datetime | None]
    revoked_by: Mapped[str | None] = mapped_column(String(300))
