"""`SqlStore`: the engine's `Store` on SQLAlchemy 2, for SQLite and PostgreSQL.

One object made of the role stores, each in its own module: the run store (`store.runs`),
the inbox (`store.inbox`), the outbox (`store.outbox`), the audit trail (`store.audit`),
the switches (`store.switches`) and the requests (`store.requests`). All of them run their transactions through one
`store.database.Database`, which the stores kept beside it (`store.triggers`, `store.mail`,
`store.web_sessions`, `store.grants`) share as well.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from store.audit import SqlAudit
from store.database import Database, connect
from store.inbox import SqlInbox
from store.outbox import SqlOutbox
from store.requests import SqlRequests
from store.runs import SqlRuns
from store.switches import SqlSwitches

__all__ = ["SqlStore", "connect"]


class SqlStore(SqlRuns, SqlInbox, SqlOutbox, SqlAudit, SqlSwitches, SqlRequests):
    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(Database(engine))

    @property
    def engine(self) -> AsyncEngine:
        return self.db.engine

    @property
    def is_postgres(self) -> bool:
        return self.db.is_postgres

    async def aclose(self) -> None:
        await self.db.aclose()
