"""`SqlMailLog`: the email channel's `MailLog` (handled Message-IDs, used links) in SQL.

It runs its transactions through the run store's `Database`, so on SQLite a mail being
marked handled queues behind the same writer lock as everything else.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, select

from pizzabot.store.sql import SqlStore
from pizzabot.store.tables_mail import EmailProcessedRow


class SqlMailLog:
    def __init__(self, store: SqlStore) -> None:
        self.db = store.db

    async def record_once(self, key: str, *, kind: str, now: datetime) -> bool:
        # Insert-or-nothing on the primary key works the same on SQLite and PostgreSQL.
        first = (
            self.db.insert(EmailProcessedRow)
            .values(key=key[:255], kind=kind, at=now)
            .on_conflict_do_nothing(index_elements=["key"])
        )

        def tx(c: Connection) -> bool:
            result: Any = c.execute(first)
            return bool(result.rowcount == 1)

        return await self.db.run(tx)

    async def release(self, key: str) -> None:
        def tx(c: Connection) -> None:
            c.execute(delete(EmailProcessedRow).where(EmailProcessedRow.key == key[:255]))

        await self.db.run(tx)

    async def seen(self, key: str) -> bool:
        def tx(c: Connection) -> bool:
            q = select(EmailProcessedRow.key).where(EmailProcessedRow.key == key[:255])
            return c.execute(q).first() is not None

        return await self.db.run(tx)
