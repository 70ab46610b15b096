"""`SqlStore`: the engine's `Store` on SQLAlchemy 2, for SQLite and PostgreSQL.

One object made of the role stores, each in its own module: the run store (`pizzabot.store.runs`),
the inbox (`pizzabot.store.inbox`), the outbox (`pizzabot.store.outbox`), the audit trail (`pizzabot.store.audit`),
the switches (`pizzabot.store.switches`), the requests (`pizzabot.store.requests`), the FYIs'
Undo (`pizzabot.store.undos`) and the
cards the fatigue figures read (`pizzabot.store.stats`). All of them run their transactions through one
`pizzabot.store.database.Database`, which the stores kept beside it (`pizzabot.store.triggers`, `pizzabot.store.mail`,
`pizzabot.store.web_sessions`, `pizzabot.store.grants`) share as well.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from pizzabot.store.audit import SqlAudit
from pizzabot.store.database import Database, connect
from pizzabot.store.inbox import SqlInbox
from pizzabot.store.outbox import SqlOutbox
from pizzabot.store.requests import SqlRequests
from pizzabot.store.runs import SqlRuns
from pizzabot.store.stats import SqlHistory
from pizzabot.store.switches import SqlSwitches
from pizzabot.store.undos import SqlUndos

__all__ = ["SqlStore", "connect"]


class SqlStore(
    SqlRuns, SqlInbox, SqlOutbox, SqlAudit, SqlSwitches, SqlRequests, SqlUndos, SqlHistory
):
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
