"""Switches in SQL: the global kill switch, one row that every server sharing the database
reads. Claiming runs reads it in the claim's own transaction (`kill_is_on`), so no run is
taken once it is seen on. Implements `pizzabot.agent.store.Switches`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, select
from sqlalchemy.orm import Session

from pizzabot.store.database import Database, orm
from pizzabot.store.tables import SwitchRow

SWITCHES = cast(Table, SwitchRow.__table__)

KILL = "kill"
_SELECT_KILL = select(SWITCHES.c.value).where(SWITCHES.c.name == KILL)


def kill_switch(c: Connection) -> dict[str, Any] | None:
    """Who turned the kill switch on and when, or None while it is off."""
    value = c.execute(_SELECT_KILL).scalar_one_or_none()
    return dict(value) if value and value.get("on") else None


class SqlSwitches:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get_kill(self) -> dict[str, Any] | None:
        return await self.db.read(kill_switch)

    async def set_kill(
        self, *, on: bool, actor: str, now: datetime, reason: str | None = None
    ) -> None:
        def tx(s: Session) -> None:
            row = s.get(SwitchRow, KILL)
            value: dict[str, Any] = {"on": on, "by": actor, "at": now.isoformat()}
            if reason:
                value["reason"] = reason
            if row is None:
                s.add(SwitchRow(name=KILL, value=value, updated_at=now))
            else:
                row.value = value
                row.updated_at = now

        await self.db.run(orm(tx))
