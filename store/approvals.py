"""Counts of approvals in SQL, for items that need more than one person.

Each counted approval is one transaction: the item locked (a pending one only), the person
checked against the current count, the row written with its audit entry (`approval`), the
item's card (`Risk.approved`) showing the new count, and its sent copies marked for update,
so Slack, email and the web page show who has approved. An edit also replaces the item's
arguments and starts the next count. Implements `pizzabot.agent.policy.quorum.Approvals`, through
the run store's `Database`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import Connection, Table, insert, select, update
from sqlalchemy.exc import IntegrityError

from pizzabot.agent.errors import AlreadyApproved, AlreadyDecided, CardChanged, NotFound
from pizzabot.agent.model import ItemStatus, Preview, Risk
from pizzabot.agent.policy.quorum import Approval, Count
from pizzabot.store.audit import insert_audit
from pizzabot.store.database import Database
from pizzabot.store.inbox import ITEMS, item_of
from pizzabot.store.outbox import copies_need_update
from pizzabot.store.tables_approvals import ItemApprovalRow

APPROVALS = cast(Table, ItemApprovalRow.__table__)


def _approval(row: Any) -> Approval:
    return Approval(person=row.person, channel=row.channel, identity=row.identity, at=row.at)


@dataclass(frozen=True)
class _Round:
    """The count an approval joins: its round (edits so far), who has approved in it, the
    arguments it approves, the first proposal (when edited) and, for an edit, the arguments
    it replaces."""

    edits: int
    current: list[Approval]
    args: Any
    proposal: Any
    edited_from: Any = None

    def count(self, required: int, *more: Approval) -> Count:
        return Count(required, (*self.current, *more), self.args, self.edits, self.proposal)


def _locked_pending(c: Connection, item_id: str, version: int | None) -> Any:
    # Locked, so that an edit and an approval of one item count one after the other.
    item = c.execute(select(ITEMS).where(ITEMS.c.id == item_id).with_for_update()).first()
    if item is None:
        raise NotFound(f"no item {item_id}")
    if item.status != ItemStatus.PENDING.value:
        raise AlreadyDecided(item_of(item))
    if version is not None and item.version != version:
        raise CardChanged(item_of(item))
    return item


def _round(c: Connection, item: Any, args: dict[str, Any] | None) -> _Round:
    """The round an approval joins: the current one, or a new one when it edits."""
    rows = list(
        c.execute(select(APPROVALS).where(APPROVALS.c.item_id == item.id).order_by(APPROVALS.c.id))
    )
    edits = max((r.round for r in rows), default=0)
    first_edit = next((r for r in rows if r.round == 1), None)
    proposal = first_edit.edited_from if first_edit is not None else None
    if args is not None:
        proposal = proposal if proposal is not None else item.args
        return _Round(edits + 1, [], args, proposal, edited_from=item.args)
    current = [_approval(r) for r in rows if r.round == edits]
    return _Round(edits, current, item.args, proposal)


def _insert(c: Connection, item_id: str, joined: _Round, approval: Approval) -> None:
    try:
        c.execute(
            insert(APPROVALS).values(
                item_id=item_id,
                round=joined.edits,
                person=approval.person,
                channel=approval.channel,
                identity=approval.identity,
                at=approval.at,
                edited_from=joined.edited_from,
            )
        )
    except IntegrityError:  # the same person's other click won the race
        raise AlreadyApproved(approval.name, "counted already") from None


def _show(
    c: Connection,
    item: Any,
    joined: _Round,
    approval: Approval,
    counted: Count,
    required: int,
    preview: Preview | None = None,
) -> None:
    """The new count on the item's card, its sent copies marked for update, and the audit;
    after an edit, the edited arguments' `preview` in place of the old one."""
    risk = replace(Risk(**(item.risk or {})), approvals_required=required, approved=counted.shown())
    if joined.edited_from is not None:
        risk = replace(risk, preview=preview)
    # An edit changes what the card asks about: its version (and so its digest) moves on.
    version = item.version + 1 if joined.edited_from is not None else item.version
    c.execute(
        update(ITEMS)
        .where(ITEMS.c.id == item.id)
        .values(risk=risk.as_dict(), args=joined.args, version=version)
    )
    copies_need_update(c, item.id, approval.at)
    detail: dict[str, Any] = {
        "person": approval.person,
        "count": counted.text(),
        "required": required,
        "edits": joined.edits,
    }
    if joined.edited_from is not None:
        detail.update(edit=True, args_before=joined.edited_from, args_after=joined.args)
    insert_audit(
        c,
        action="approval",
        actor=approval.identity,
        channel=approval.channel,
        now=approval.at,
        run_id=item.run_id,
        item_id=item.id,
        detail=detail,
    )


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
        version: int | None = None,
        preview: Preview | None = None,
    ) -> Count:
        def tx(c: Connection) -> Count:
            item = _locked_pending(c, item_id, version)
            joined = _round(c, item, args)
            if args is None and any(a.person == approval.person for a in joined.current):
                counted = joined.count(required)
                if counted.reached:  # a retry after the count was reached: finish it
                    return counted
                raise AlreadyApproved(approval.name, counted.text())
            _insert(c, item_id, joined, approval)
            counted = joined.count(required, approval)
            _show(c, item, joined, approval, counted, required, preview)
            return counted

        return await self.db.run(tx)
