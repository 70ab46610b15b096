"""An FYI's Undo in SQL (`pizzabot.agent.store.Undos`): taken at most once, then ended.

Taking it is one conditional update on the item's `undo_state` (`offered` → `running`), so
two clicks at once, in one process or in two, find one winner; the loser is told who won.
Its end marks the item's sent copies for an update, so each shows how it went. (Its start
does not: a copy updated while the call runs could swallow the mark its end sets.)
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import cast

from sqlalchemy import Connection, Table, select, update

from pizzabot.agent.errors import AlreadyUndone, Conflict, NotFound
from pizzabot.agent.model import Item, Undo
from pizzabot.store.database import Database
from pizzabot.store.inbox import item_of
from pizzabot.store.outbox import copies_need_update
from pizzabot.store.tables import ItemRow

ITEMS = cast(Table, ItemRow.__table__)


def _item(c: Connection, item_id: str) -> Item:
    row = c.execute(select(ITEMS).where(ITEMS.c.id == item_id)).first()
    if row is None:
        raise NotFound(f"no item {item_id}")
    return item_of(row)


def _offered(item: Item) -> Undo:
    if item.undo is None:
        raise Conflict("this item offers no Undo")
    return item.undo


class SqlUndos:
    db: Database

    async def start_undo(self, item_id: str, *, by: str, via: str, now: datetime) -> Item:
        def tx(c: Connection) -> Item:
            undo = _offered(_item(c, item_id))
            taken = replace(undo, state="running", by=by, via=via, at=now)
            done = c.execute(
                update(ITEMS)
                .where(ITEMS.c.id == item_id, ITEMS.c.undo_state == "offered")
                .values(undo=taken.as_dict(), undo_state=taken.state)
            )
            if done.rowcount != 1:
                raise AlreadyUndone(_item(c, item_id))
            return _item(c, item_id)

        return await self.db.run(tx)

    async def finish_undo(self, item_id: str, *, ok: bool, outcome: str, now: datetime) -> Item:
        def tx(c: Connection) -> Item:
            undo = _offered(_item(c, item_id))
            ended = replace(undo, state="done" if ok else "failed", outcome=outcome)
            c.execute(
                update(ITEMS)
                .where(ITEMS.c.id == item_id, ITEMS.c.undo_state == "running")
                .values(undo=ended.as_dict(), undo_state=ended.state)
            )
            copies_need_update(c, item_id, now)
            return _item(c, item_id)

        return await self.db.run(tx)
