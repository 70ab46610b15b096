"""Grants in SQL: kept, looked up for a call, counted when used, listed and revoked.

Every change is one transaction with its audit entry ("grant created", "grant used",
"grant revoked"), so the trail says exactly what the table does. Implements
`pizzabot.agent.policy.grants.Grants`, through the run store's `Database`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, and_, or_, select, update

from pizzabot.agent.errors import NotFound
from pizzabot.agent.model import TERMINAL
from pizzabot.agent.policy.grants import Grant
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database
from pizzabot.store.tables import RunRow
from pizzabot.store.tables_grants import GrantRow

GRANTS = cast(Table, GrantRow.__table__)
RUNS = cast(Table, RunRow.__table__)


def grant_of(row: Any) -> Grant:
    return Grant(
        id=row.id,
        skill=row.skill,
        tool=row.tool,
        choice=row.choice,
        granted_by=row.granted_by,
        granted_via=row.granted_via,
        granted_at=row.granted_at,
        run_id=row.run_id,
        item_id=row.item_id,
        fingerprint=row.fingerprint,
        args=row.args,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        revoked_by=row.revoked_by,
        uses=row.uses,
        last_used_at=row.last_used_at,
    )


def _holding(now: datetime) -> Any:
    return and_(
        GRANTS.c.revoked_at.is_(None),
        or_(GRANTS.c.expires_at.is_(None), GRANTS.c.expires_at > now),
    )


def _detail(grant: Grant) -> dict[str, Any]:
    return {
        "grant": grant.id,
        "tool": grant.tool,
        "skill": grant.skill,
        "choice": grant.choice,
        "covers": grant.describe(),
        "expires_at": grant.expires_at.isoformat() if grant.expires_at else None,
    }


class SqlGrants:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, grant: Grant) -> Grant:
        made = (
            self.db.insert(GRANTS)
            .values(
                id=grant.id,
                skill=grant.skill,
                tool=grant.tool,
                choice=grant.choice,
                granted_by=grant.granted_by,
                granted_via=grant.granted_via,
                granted_at=grant.granted_at,
                run_id=grant.run_id,
                item_id=grant.item_id,
                fingerprint=grant.fingerprint,
                args=grant.args,
                expires_at=grant.expires_at,
                uses=0,
            )
            .on_conflict_do_nothing(index_elements=["item_id"])
        )

        def tx(c: Connection) -> Grant:
            if c.execute(made).rowcount:
                insert_audit(
                    c,
                    action="grant created",
                    actor=grant.granted_by,
                    channel=grant.granted_via,
                    now=grant.granted_at,
                    run_id=grant.run_id,
                    item_id=grant.item_id,
                    detail=_detail(grant),
                )
            row = c.execute(select(GRANTS).where(GRANTS.c.item_id == grant.item_id)).one()
            return grant_of(row)

        return await self.db.run(tx)

    async def for_call(self, *, skill: str, tool: str, run_id: str, now: datetime) -> list[Grant]:
        q = (
            select(GRANTS)
            .where(
                GRANTS.c.skill == skill,
                GRANTS.c.tool == tool,
                _holding(now),
                or_(GRANTS.c.choice != "run", GRANTS.c.run_id == run_id),
            )
            .order_by(GRANTS.c.granted_at, GRANTS.c.id)
        )

        def tx(c: Connection) -> list[Grant]:
            return [grant_of(r) for r in c.execute(q)]

        return await self.db.run(tx)

    async def used(self, grant: Grant, *, run_id: str, call_id: str, now: datetime) -> None:
        count = (
            update(GRANTS)
            .where(GRANTS.c.id == grant.id)
            .values(uses=GRANTS.c.uses + 1, last_used_at=now)
        )

        def tx(c: Connection) -> None:
            c.execute(count)
            insert_audit(
                c,
                action="grant used",
                actor=grant.granted_by,
                channel=grant.granted_via,
                now=now,
                run_id=run_id,
                detail={**_detail(grant), "call_id": call_id},
            )

        await self.db.run(tx)

    async def get(self, grant_id: str) -> Grant:
        def tx(c: Connection) -> Grant:
            row = c.execute(select(GRANTS).where(GRANTS.c.id == grant_id)).first()
            if row is None:
                raise NotFound(f"no grant {grant_id}")
            return grant_of(row)

        return await self.db.run(tx)

    async def list_grants(self, *, now: datetime, ended: bool = False) -> list[Grant]:
        q = select(GRANTS).order_by(GRANTS.c.granted_at.desc(), GRANTS.c.id.desc())
        if not ended:
            # A `run` grant ends with its run (a follow-up that wakes the run lists it again).
            finished = select(RUNS.c.id).where(RUNS.c.status.in_([s.value for s in TERMINAL]))
            q = q.where(
                _holding(now), or_(GRANTS.c.choice != "run", GRANTS.c.run_id.not_in(finished))
            )

        def tx(c: Connection) -> list[Grant]:
            return [grant_of(r) for r in c.execute(q)]

        return await self.db.run(tx)

    async def revoke(self, grant_id: str, *, actor: str, channel: str, now: datetime) -> Grant:
        revoke = (
            update(GRANTS)
            .where(GRANTS.c.id == grant_id, GRANTS.c.revoked_at.is_(None))
            .values(revoked_at=now, revoked_by=actor)
        )

        def tx(c: Connection) -> Grant:
            done = c.execute(revoke).rowcount
            row = c.execute(select(GRANTS).where(GRANTS.c.id == grant_id)).first()
            if row is None:
                raise NotFound(f"no grant {grant_id}")
            grant = grant_of(row)
            if done:
                insert_audit(
                    c,
                    action="grant revoked",
                    actor=actor,
                    channel=channel,
                    now=now,
                    run_id=grant.run_id,
                    item_id=grant.item_id,
                    detail=_detail(grant),
                )
            return grant

        return await self.db.run(tx)
