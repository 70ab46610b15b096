"""SQL for web sessions ended by logout.

A web session is a signed cookie with nothing stored while it lives; logging out is the one
moment the server must remember something, or a copied cookie would keep working until it
expires. The ended session ids live in the database, so every server sharing it refuses them.
Implements `pizzabot.channels.web.SessionEnds`, through the run store's `Database`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, select

from pizzabot.store.sql import SqlStore
from pizzabot.store.tables_triggers import EndedSessionRow


class SqlSessionEnds:
    def __init__(self, store: SqlStore) -> None:
        self.db = store.db

    async def end(self, sid: str, *, expires_at: datetime, now: datetime) -> None:
        """Refuse the web session from now on (until `expires_at`, when its cookie would expire)."""
        ended = (
            self.db.insert(EndedSessionRow)
            .values(sid=sid, expires_at=expires_at)
            .on_conflict_do_nothing(index_elements=["sid"])  # two logouts of one session
        )

        def tx(c: Connection) -> None:
            # Rows past their cookie's own expiry guard nothing any more.
            c.execute(delete(EndedSessionRow).where(EndedSessionRow.expires_at < now))
            c.execute(ended)

        await self.db.run(tx)

    async def ended(self, sid: str) -> bool:
        def tx(c: Connection) -> bool:
            q = select(EndedSessionRow.sid).where(EndedSessionRow.sid == sid)
            return c.execute(q).first() is not None

        return await self.db.run(tx)
