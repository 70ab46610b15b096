"""The memory store's Undo of an FYI (`Undos`): taken at most once, then ended, its end
marking the item's sent copies for an update."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from pizzabot.agent.errors import AlreadyUndone, Conflict, NotFound
from pizzabot.agent.model import Item, Undo
from pizzabot.agent.testing._memory_state import MemoryBase, MemoryState, fresh


def _offered(s: MemoryState, item_id: str) -> tuple[Item, Undo]:
    item = s.items.get(item_id)
    if item is None:
        raise NotFound(f"no item {item_id}")
    if item.undo is None:
        raise Conflict("this item offers no Undo")
    return item, item.undo


class MemoryUndos(MemoryBase):
    async def start_undo(self, item_id: str, *, by: str, via: str, now: datetime) -> Item:
        with self.transaction() as s:
            item, undo = _offered(s, item_id)
            if undo.state != "offered":
                raise AlreadyUndone(fresh(item))
            taken = replace(undo, state="running", by=by, via=via, at=now)
            s.items[item_id] = replace(item, undo=taken)
            return fresh(s.items[item_id])

    async def finish_undo(self, item_id: str, *, ok: bool, outcome: str, now: datetime) -> Item:
        with self.transaction() as s:
            item, undo = _offered(s, item_id)
            if undo.state == "running":
                ended = replace(undo, state="done" if ok else "failed", outcome=outcome)
                s.items[item_id] = replace(item, undo=ended)
            s.copies_need_update(item_id)
            return fresh(s.items[item_id])
