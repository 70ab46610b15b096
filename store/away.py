"""Away states in SQL: set, ended, and read by every server and worker.

Implements `pizzabot.agent.policy.away.AwayBook` through the run store's `Database`. Each
change is one transaction with its audit entry (`away_set`, `away_ended`), so the trail says
who was away, who decided for them, and who said so.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, delete, select, update

from pizzabot.agent.policy.away import Away, AwayAccess
from pizzabot.agent.skills import SkillBook
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database
from pizzabot.store.tables_away import AwayRow

AWAY = cast(Table, AwayRow.__table__)


def utcnow() -> datetime:
    return datetime.now(UTC)


def away_of(row: Any) -> Away:
    return Away(
        person=row.person,
        delegate=row.delegate,
        until=row.until,
        set_by=row.set_by,
        set_at=row.set_at,
    )


class SqlAway:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def set(self, away: Away) -> Away:
        values = {
            "delegate": away.delegate,
            "until": away.until,
            "set_by": away.set_by,
            "set_at": away.set_at,
        }

        def tx(c: Connection) -> Away:
            c.execute(delete(AWAY).where(AWAY.c.person == away.person))
            c.execute(self.db.insert(AWAY).values(person=away.person, **values))
            insert_audit(
                c,
                action="away_set",
                actor=away.set_by,
                channel="away",
                now=away.set_at,
                detail={
                    "person": away.person,
                    "delegate": away.delegate,
                    "until": away.until.isoformat(),
                },
            )
            return away

        return await self.db.run(tx)

    async def back(self, person: str, *, by: str, now: datetime) -> Away | None:
        def tx(c: Connection) -> Away | None:
            row = c.execute(select(AWAY).where(AWAY.c.person == person)).first()
            if row is None or row.until <= now:
                return None
            c.execute(update(AWAY).where(AWAY.c.person == person).values(until=now))
            insert_audit(
                c,
                action="away_ended",
                actor=by,
                channel="away",
                now=now,
                detail={"person": person, "delegate": row.delegate},
            )
            return away_of(row)

        return await self.db.run(tx)

    async def current(self, now: datetime) -> list[Away]:
        q = select(AWAY).where(AWAY.c.until > now).order_by(AWAY.c.person)

        def tx(c: Connection) -> list[Away]:
            return [away_of(r) for r in c.execute(q)]

        return await self.db.read(tx)


def away_access(
    skills: SkillBook, db: Database, *, email_senders: Iterable[str] = ()
) -> AwayAccess:
    """The policy every channel asks, with away states kept in `db`."""
    return AwayAccess(skills=skills, book=SqlAway(db), clock=utcnow, email_senders=email_senders)
