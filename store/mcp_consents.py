"""MCP OAuth consents in SQL, so that a callback may land on any server process.

Implements `pizzabot.agent.mcp_consents.Consents` through the run store's `Database`. The
answer is recorded by one conditional UPDATE (a row that waits, unanswered and unexpired), so
two callbacks with one state, on two processes, are told apart: the second is refused. Every
callback is audited in the same transaction: `mcp_auth_consent_answered` with the skill,
server and run, or `mcp_auth_callback_refused` (nothing of the hostile request is repeated).
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import Connection, Table, delete, select, update

from pizzabot.agent.mcp_consents import Pending, Returned
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database
from pizzabot.store.tables_mcp import McpConsentRow

CONSENTS = cast(Table, McpConsentRow.__table__)


class SqlConsents:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def open(
        self, key: str, pending: Pending, *, now: datetime, expires_at: datetime
    ) -> None:
        row = {
            "key": key,
            "skill": pending.skill,
            "server": pending.server,
            "run_id": pending.run_id,
            "created_at": now,
            "expires_at": expires_at,
        }

        def tx(c: Connection) -> None:
            c.execute(delete(CONSENTS).where(CONSENTS.c.expires_at <= now))
            c.execute(delete(CONSENTS).where(CONSENTS.c.key == key))
            c.execute(self.db.insert(CONSENTS).values(**row))

        await self.db.run(tx)

    async def answer(self, key: str, returned: Returned, *, now: datetime) -> Pending | None:
        waits = (
            (CONSENTS.c.key == key)
            & CONSENTS.c.answered_at.is_(None)
            & (CONSENTS.c.expires_at > now)
        )
        answered = (
            update(CONSENTS)
            .where(waits)
            .values(answered_at=now, code=returned.code, iss=returned.iss, error=returned.error)
        )

        def tx(c: Connection) -> Pending | None:
            if c.execute(answered).rowcount != 1:
                insert_audit(
                    c,
                    action="mcp_auth_callback_refused",
                    actor="oauth-callback",
                    channel="http",
                    now=now,
                    detail={"why": "no consent waits for its state (unknown, used or expired)"},
                )
                return None
            row = c.execute(select(CONSENTS).where(CONSENTS.c.key == key)).one()
            pending = Pending(row.skill, row.server, row.run_id)
            insert_audit(
                c,
                action="mcp_auth_consent_answered",
                actor="oauth-callback",
                channel="http",
                now=now,
                run_id=row.run_id,
                detail={
                    "skill": row.skill,
                    "server": row.server,
                    "outcome": "code" if returned.code else f"refused: {returned.error}",
                },
            )
            return pending

        return await self.db.run(tx)

    async def take(self, key: str) -> Returned | None:
        def tx(c: Connection) -> Returned | None:
            q = select(CONSENTS).where(CONSENTS.c.key == key, CONSENTS.c.answered_at.is_not(None))
            row = c.execute(q).first()
            if row is None:
                return None
            # Deleted by key and answer: only one taker gets the code.
            gone = delete(CONSENTS).where(
                CONSENTS.c.key == key, CONSENTS.c.answered_at.is_not(None)
            )
            if c.execute(gone).rowcount != 1:
                return None
            return Returned(code=row.code, iss=row.iss, error=row.error)

        return await self.db.run(tx)

    async def drop(self, key: str) -> None:
        def tx(c: Connection) -> None:
            c.execute(delete(CONSENTS).where(CONSENTS.c.key == key))

        await self.db.run(tx)
