"""The email channel's one table: mails and links already handled, by key.

The primary key is the point: a Message-ID (or a used link) is inserted once, so a reply is
acted on once however many times it is fetched and however many servers share the database.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class EmailProcessedRow(Base):
    __tablename__ = "email_processed"
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # mail | link
    at: Mapped[datetime]
