"""Counts of approvals in SQL, for items that need more than one person.

Each counted approval is one transaction: the item locked (a pending one only), the person
checked against the current count, the row written with its audit entry (`approval`), the
item's card (`Risk.approved`) showing the new count, and its sent copies marked for update,
so Slack, email and the web page show who has approved. An edit also replaces the item's
arguments and starts the next count. Implements `agent.policy.quorum.Approvals`, through
the run store's `Database`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from sqlalchemy import Connection, Table, insert, select, update
from sqlalchemy.exc import IntegrityError

from agent.errors import AlreadyApproved, AlreadyDecided, NotFound
from agent.model import ItemStatus, Risk
from agent.policy.quorum import Approval, Count
from store.audit import insert_audit
from store.database import Database
from store.inbox import ITEMS, item_of
from store.outbox import copies_need_update
from store.tables_approvals import ItemApprovalRow

APPROVALS = cast(Table, ItemApprovalRow.__table__)


def _approval(row: Any) -> Approval:
    return Approval(person=row.person, channel=row.channel, identity=row.identity, at=row.at)


class SqlApprovals:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(
        self,
        item_id: str,
        approval: Approval,
        *,
        required: int,
        args: dict[str, Any] | None = None,
    ) -> Count:
        def tx(c: Connection) -> Count:
            # Locked, so that an edit and an approval of one item count one after the other.
            item = c.execute(select(ITEMS).where(ITEMS.c.id == item_id).with_for_update()).first()
            if item is None:
                raise NotFound(f"no item {item_id}")
            if item.status != ItemStatus.PENDING.value:
                raise AlreadyDecided(item_of(item))
            rows = list(
                c.execute(
                    select(APPROVALS).where(APPROVALS.c.item_id == item_id).order_by(APPROVALS.c.id)
                )
            )
            edits = max((r.round for r in rows), default=0)
            current = [_approval(r) for r in rows if r.round == edits]
            first_edit = next((r for r in rows if r.round == 1), None)
            proposal = first_edit.edited_from if first_edit is not None else None
            now_args = item.args
            edited_from = None
            if args is not None:
                edits, current, edited_from, now_args = edits + 1, [], item.args, args
                proposal = proposal if proposal is not None else item.args
            elif any(a.person == approval.person for a in current):
                counted = Count(required, tuple(current), now_args, edits, proposal)
                if counted.reached:  # a retry after the count was reached: finish it
                    return counted
                raise AlreadyApproved(approval.name, counted.text())
            try:
                c.execute(
                    insert(APPROVALS).values(
                        item_id=item_id,
                        round=edits,
                        person=approval.person,
                        channel=approval.channel,
                        identity=approval.identity,
                        at=approval.at,
                        edited_from=edited_from,
                    )
                )
            except IntegrityError:  # the same person's other click won the race
                raise AlreadyApproved(approval.name, "counted already") from None
            counted = Count(required, (*current, approval), now_args, edits, proposal)
            risk = replace(
                Risk(**(item.risk or {})), approvals_required=required, approved=counted.shown()
            )
            c.execute(
                update(ITEMS)
                .where(ITEMS.c.id == item_id)
                .values(risk=risk.as_dict(), args=now_args)
            )
            copies_need_update(c, item_id, approval.at)
            detail: dict[str, Any] = {
                "person": approval.person,
                "count": counted.text(),
                "required": required,
                "edits": edits,
            }
            if edited_from is not None:
                detail.update(edit=True, args_before=edited_from, args_after=now_args)
            insert_audit(
                c,
                action="approval",
                actor=approval.identity,
                channel=approval.channel,
                now=approval.at,
                run_id=item.run_id,
                item_id=item_id,
                detail=detail,
            )
            return counted

        return await self.db.run(tx)
