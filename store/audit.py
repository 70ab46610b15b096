"""The audit trail in SQL: who did what, through which channel, to which run or item.

Writes that are audited as part of a larger change (a decision) call `insert_audit` in that
change's transaction; everything else writes one entry on its own. Each entry is the audit
chain's next row (`pizzabot.store.chain`). Implements `pizzabot.agent.store.AuditLog`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from pizzabot.agent.model import AuditEntry
from pizzabot.store.chain import AUDIT, append
from pizzabot.store.database import Database


def insert_audit(
    c: Connection,
    *,
    action: str,
    actor: str,
    channel: str,
    now: datetime,
    run_id: str | None = None,
    item_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    append(
        c,
        {
            "at": now,
            "action": action,
            "actor": actor,
            "channel": channel,
            "run_id": run_id,
            "item_id": item_id,
            "detail": detail or {},
        },
    )


class SqlAudit:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def audit(
        self,
        *,
        action: str,
        actor: str,
        channel: str,
        now: datetime,
        run_id: str | None = None,
        item_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        def tx(c: Connection) -> None:
            insert_audit(
                c,
                action=action,
                actor=actor,
                channel=channel,
                now=now,
                run_id=run_id,
                item_id=item_id,
                detail=detail,
            )

        await self.db.run(tx)

    async def audit_log(self, *, limit: int = 200) -> list[AuditEntry]:
        q = select(AUDIT).order_by(AUDIT.c.id.desc()).limit(limit)

        def tx(c: Connection) -> list[AuditEntry]:
            return [
                AuditEntry(
                    id=r.id,
                    at=r.at,
                    action=r.action,
                    actor=r.actor,
                    channel=r.channel,
                    run_id=r.run_id,
                    item_id=r.item_id,
                    detail=r.detail,
                )
                for r in c.execute(q)
            ]

        return await self.db.run(tx)
