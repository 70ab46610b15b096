"""SQL for web sessions ended by logout.

A web session is a signed cookie with nothing stored while it lives; logging out is the one
moment the server must remember something, or a copied cookie would keep working until it
expires. The ended session ids live in the database, so every server sharing it refuses them.
Implements `channels.web.SessionEnds`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from store.sql import SqlStore
from store.tables_triggers import EndedSessionRow


class SqlSessionEnds:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    async def end(self, sid: str, *, expires_at: datetime, now: datetime) -> None:
        """Refuse this session from now on (until `expires_at`, when its cookie would expire)."""
        async with self.store._tx() as s:
            # Rows past their cookie's own expiry guard nothing any more.
            await s.execute(delete(EndedSessionRow).where(EndedSessionRow.expires_at < now))
            insert: Any = pg_insert if self.store.is_postgres else sqlite_insert
            await s.execute(
                insert(EndedSessionRow)
                .values(sid=sid, expires_at=expires_at)
                .on_conflict_do_nothing(index_elements=["sid"])  # two logouts of one session
            )

    async def ended(self, sid: str) -> bool:
        async with self.store._tx() as s:
            q = select(EndedSessionRow.sid).where(EndedSessionRow.sid == sid)
            return (await s.execute(q)).first() is not None
