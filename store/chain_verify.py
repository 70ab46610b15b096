"""Reading the audit chain back: `verify` walks every row in the order they were written and
names the first one that is not what was written (edited, removed, reordered or inserted),
then checks each signed checkpoint; `export` hands the rows on as plain dictionaries (JSON
Lines for a SIEM), hashes included, so the chain can be checked again elsewhere.

Rows are read a page at a time, so neither grows with the table.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, select

from pizzabot.store.chain import AUDIT, CHECKPOINTS, GENESIS, HEAD, checkpoint_mac, hash_of
from pizzabot.store.database import Database

_PAGE = 1000


@dataclass
class Verdict:
    """What `verify` found: how much it read, the first bad row (None: the chain holds) and
    every checkpoint that does not match."""

    rows: int = 0
    checkpoints: int = 0
    first_bad: str | None = None
    bad_checkpoints: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.first_bad is None and not self.bad_checkpoints


def _name(row: Any) -> str:
    return f"audit row {row.id} ({row.action} by {row.actor} at {row.at.isoformat()})"


@dataclass
class _Walk:
    """The walk's state: what the next row must link to, and the hashes checkpoints name."""

    wanted: set[int]
    prev: str = GENESIS
    prev_row: Any = None
    expect: int = 1
    seen: dict[int, str] = field(default_factory=dict)
    first_bad: str | None = None
    count: int = 0

    def step(self, c: Connection, row: Any) -> None:
        self.count += 1
        problem = self._problem(c, row)
        if problem is not None and self.first_bad is None:
            self.first_bad = problem
        if row.seq in self.wanted:
            self.seen.setdefault(row.seq, row.hash)
        # Take up the chain again after a bad row, so checkpoints further on are still checked.
        self.prev, self.prev_row, self.expect = row.hash, row, (row.seq or self.expect) + 1

    def _problem(self, c: Connection, row: Any) -> str | None:
        if row.hash is None or row.seq is None or row.prev_hash is None:
            return f"{_name(row)} was inserted: it carries no place in the chain"
        if hash_of(row, prev=row.prev_hash) != row.hash:
            return f"{_name(row)} was edited: its fields do not match its hash"
        if row.seq > self.expect:
            moved = c.execute(select(AUDIT.c.id).where(AUDIT.c.seq == self.expect)).first()
            if moved is not None:
                return (
                    f"{_name(row)} is out of order: chain place {self.expect} is row {moved.id}, "
                    "written later (rows were reordered)"
                )
            gone = f"{self.expect}" + (f"-{row.seq - 1}" if row.seq - 1 > self.expect else "")
            return f"{_name(row)}: the row(s) before it at chain place {gone} were removed"
        if row.seq < self.expect:
            return (
                f"{_name(row)} was inserted or moved: its chain place {row.seq} was already taken"
            )
        if row.prev_hash != self.prev:
            before = _name(self.prev_row) if self.prev_row is not None else "the chain's start"
            return (
                f"{_name(row)} does not follow {before}: one of them was changed "
                "(its hash rewritten) or put in"
            )
        return None


def _head_problem(c: Connection, walk: _Walk) -> str | None:
    head = c.execute(select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1)).first()
    if head is None:
        return "the chain's head row (audit_head) was removed"
    last = walk.expect - 1
    if head.seq > last:
        after = _name(walk.prev_row) if walk.prev_row is not None else "the chain's start"
        return (
            f"the newest row(s) after {after} were removed: the chain's head is at place {head.seq}"
        )
    if head.seq != last or head.hash != walk.prev:
        return f"the chain's head (place {head.seq}) does not match its newest row: it was changed"
    return None


def _check_checkpoints(cps: list[Any], walk: _Walk, key: bytes | None) -> list[str]:
    bad = []
    prev_mac = GENESIS
    for cp in cps:
        what = f"checkpoint {cp.id} (chain place {cp.seq}, signed {cp.at.isoformat()})"
        if key is not None:
            mac = checkpoint_mac(key, seq=cp.seq, hash=cp.hash, at=cp.at, prev_mac=prev_mac)
            if not hmac.compare_digest(mac, cp.mac):
                bad.append(
                    f"{what} does not match its signature (changed, or one before it removed)"
                )
        if walk.seen.get(cp.seq) != cp.hash:
            bad.append(f"{what} does not match the chain: rows up to that place were changed")
        prev_mac = cp.mac
    return bad


async def verify(db: Database, *, key: bytes | None) -> Verdict:
    """Walk the whole chain and its checkpoints (signatures unchecked without `key`)."""
    cps = await db.read(lambda c: list(c.execute(select(CHECKPOINTS).order_by(CHECKPOINTS.c.id))))
    walk = _Walk(wanted={cp.seq for cp in cps})
    verdict = Verdict(checkpoints=len(cps))
    after = 0
    while True:
        page_after = after

        def page(c: Connection, page_after: int = page_after) -> int | None:
            q = select(AUDIT).where(AUDIT.c.id > page_after).order_by(AUDIT.c.id).limit(_PAGE)
            rows = list(c.execute(q))
            for row in rows:
                walk.step(c, row)
            return rows[-1].id if rows else None

        last = await db.read(page)
        if last is None:
            break
        after = last
    verdict.rows = walk.count
    head = await db.read(lambda c: _head_problem(c, walk))
    verdict.first_bad = walk.first_bad or head
    verdict.bad_checkpoints = _check_checkpoints(cps, walk, key)
    return verdict


def _rows(c: Connection, *, q: Select[Any]) -> list[Any]:
    return list(c.execute(q))


def _entry(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "seq": row.seq,
        "at": row.at.isoformat(),
        "action": row.action,
        "actor": row.actor,
        "channel": row.channel,
        "run_id": row.run_id,
        "item_id": row.item_id,
        "detail": row.detail,
        "prev_hash": row.prev_hash,
        "hash": row.hash,
    }


async def export(db: Database, *, since: datetime | None = None) -> AsyncIterator[dict[str, Any]]:
    """Every audit row (written at or after `since`), oldest first, with its chain fields."""
    after = 0
    while True:
        q = select(AUDIT).where(AUDIT.c.id > after).order_by(AUDIT.c.id).limit(_PAGE)
        if since is not None:
            q = q.where(AUDIT.c.at >= since)
        rows = await db.read(functools.partial(_rows, q=q))
        if not rows:
            return
        for row in rows:
            yield _entry(row)
        after = rows[-1].id
