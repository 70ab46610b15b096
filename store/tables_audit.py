"""The audit chain's head and its signed checkpoints (store/chain.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from pizzabot.store.tables_base import Base


class AuditHeadRow(Base):
    """One row (id 1): the newest audit row's place and hash. Every audit write updates it
    first, which serialises the writers of the chain (a row lock on PostgreSQL, the write
    lock on SQLite), and its last row can never go missing unseen."""

    __tablename__ = "audit_head"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    hash: Mapped[str] = mapped_column(String(64))


class AuditCheckpointRow(Base):
    """The chain's head at one moment, signed with a key kept outside the database: a chain
    rewritten from an edited row onwards no longer matches the checkpoints after it."""

    __tablename__ = "audit_checkpoints"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    hash: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime]
    mac: Mapped[str] = mapped_column(String(64))
