"""What the fatigue figures and the policy replay read: a period's action items
(`pizzabot.agent.stats.CardHistory`) and the tool calls its runs made
(`pizzabot.agent.policy.replay.recorded_calls`), in SQL. Read-only: one read transaction
each, no row is written.
"""

from __future__ import annotations

from datetime import datetime
from itertools import groupby

from sqlalchemy import Connection, select

from pizzabot.agent.model import Box, EventKind, Item
from pizzabot.agent.policy.replay import RecordedCall, recorded_calls
from pizzabot.store.database import Database
from pizzabot.store.events import EVENTS, RUNS, event_of
from pizzabot.store.inbox import ITEMS, item_of

__all__ = ["SqlHistory", "calls_since"]


class SqlHistory:
    """The period's cards, for `pizzabot.agent.stats` (part of `SqlStore`)."""

    db: Database

    async def cards(self, *, since: datetime, until: datetime) -> list[Item]:
        q = (
            select(ITEMS)
            .where(
                ITEMS.c.box == Box.ACTION.value,
                ITEMS.c.created_at >= since,
                ITEMS.c.created_at < until,
            )
            .order_by(ITEMS.c.created_at, ITEMS.c.id)
        )

        def tx(c: Connection) -> list[Item]:
            return [item_of(r) for r in c.execute(q)]

        return await self.db.read(tx)


#: The events that say how a call was settled (`recorded_calls` reads no others).
_CALL_KINDS = tuple(
    k.value
    for k in (
        EventKind.ASSISTANT_MESSAGE,
        EventKind.TOOL_REQUEST,
        EventKind.TOOL_STARTED,
        EventKind.TOOL_RESULT,
        EventKind.DECISION,
    )
)


async def calls_since(db: Database, *, since: datetime, until: datetime) -> list[RecordedCall]:
    """The tool calls proposed in [`since`, `until`) that reached the policy, oldest first:
    three queries, whatever the number of runs."""
    active = select(EVENTS.c.run_id).where(EVENTS.c.at >= since).distinct()
    runs = select(RUNS.c.id, RUNS.c.skill).where(RUNS.c.id.in_(active))
    events = (
        select(EVENTS)
        .where(EVENTS.c.run_id.in_(active), EVENTS.c.kind.in_(_CALL_KINDS))
        .order_by(EVENTS.c.run_id, EVENTS.c.seq)
    )
    items = select(ITEMS.c.id, ITEMS.c.risk).where(ITEMS.c.run_id.in_(active))

    def tx(c: Connection) -> list[RecordedCall]:
        skills = {r.id: r.skill for r in c.execute(runs)}
        needs = {r.id: int((r.risk or {}).get("approvals_required") or 1) for r in c.execute(items)}
        out: list[RecordedCall] = []
        for run_id, rows in groupby(c.execute(events), key=lambda r: r.run_id):
            logged = [event_of(r) for r in rows]
            calls = recorded_calls(run_id, skills[run_id], logged, needs)
            out.extend(x for x in calls if since <= x.at < until)
        return sorted(out, key=lambda x: (x.at, x.run_id, x.call_id))

    return await db.read(tx)
