"""`SqlMailLog`: the email channel's `MailLog` (handled Message-IDs, used links) in SQL."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from store.tables_mail import EmailProcessedRow


class SqlMailLog:
    def __init__(self, engine: AsyncEngine) -> None:
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    async def claim(self, key: str, *, kind: str, now: datetime) -> bool:
        # Insert-or-fail on the primary key works the same on SQLite and PostgreSQL.
        try:
            async with self._sessions() as s, s.begin():
                s.add(EmailProcessedRow(key=key[:255], kind=kind, at=now))
        except IntegrityError:
            return False
        return True

    async def release(self, key: str) -> None:
        async with self._sessions() as s, s.begin():
            await s.execute(delete(EmailProcessedRow).where(EmailProcessedRow.key == key[:255]))

    async def seen(self, key: str) -> bool:
        async with self._sessions() as s:
            row = await s.execute(
                select(EmailProcessedRow.key).where(EmailProcessedRow.key == key[:255])
            )
            return row.first() is not None
