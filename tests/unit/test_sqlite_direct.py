"""A run's appends and the audit chain's rows on SQLite go to `sqlite3` itself
(`pizzabot.store.direct`): what they store must be what SQLAlchemy would have stored, and
another process holding SQLite's one write lock must make them wait, not fail."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import insert

from pizzabot.agent.events import AssistantMessage, NewEvent, Note, RunStarted
from pizzabot.agent.model import EVENT_SCHEMA_VERSION
from pizzabot.agent.store import LeaseLost
from pizzabot.store.chain import AUDIT
from pizzabot.store.chain_verify import verify
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from pizzabot.store.tables import EventRow

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
# Not UTC: the store must convert it, as SQLAlchemy's column type does.
BERLIN = T0.astimezone(ZoneInfo("Europe/Berlin"))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "pizzabot.db"


@pytest.fixture
async def store(path: Path) -> AsyncIterator[SqlStore]:
    engine = connect(f"sqlite+aiosqlite:///{path}")
    await upgrade(engine)
    s = SqlStore(engine)
    await s.create_run(
        run_id="r1",
        skill="s",
        input="hi",
        trigger="test",
        now=T0,
        events=[NewEvent(RunStarted(input="hi"))],
    )
    yield s
    await s.aclose()


def _stored(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT run_id, seq, kind, data, at, version FROM events").fetchall()


async def test_an_appended_event_is_stored_as_sqlalchemy_stores_it(
    store: SqlStore, path: Path
) -> None:
    note = NewEvent(AssistantMessage(text="Ann's quote, 5 % off — sent?"))
    appended = await store.append_events("r1", [note], lease=None, now=BERLIN)
    assert [e.seq for e in appended] == [2]

    # The same row written through SQLAlchemy's own INSERT, for comparison.
    async with store.db.engine.begin() as c:
        await c.execute(
            insert(EventRow.__table__),
            {
                "run_id": "r1",
                "seq": 99,
                "kind": note.kind.value,
                "data": note.data,
                "at": BERLIN,
                "version": EVENT_SCHEMA_VERSION,
            },
        )
    direct, through_orm = (row for row in _stored(path) if row[1] in (2, 99))
    assert direct[2:] == through_orm[2:]
    assert direct[4] == "2026-01-01 09:00:00.000000"  # UTC, SQLAlchemy's text form
    back = (await store.events("r1"))[1]
    assert back.at == T0 and back.payload == note.payload


async def test_an_audit_entry_is_stored_as_sqlalchemy_stores_it_and_the_chain_holds(
    store: SqlStore, path: Path
) -> None:
    said = {"decision": "edit", "args_after": {"to": "Zoë", "amount": 12.5, "tags": ["a", 1]}}
    for _ in range(2):
        await store.audit(
            action="decision", actor="alice", channel="slack", now=BERLIN, run_id="r1", detail=said
        )
    async with store.db.engine.begin() as c:
        await c.execute(
            insert(AUDIT),
            {
                "at": BERLIN,
                "action": "decision",
                "actor": "alice",
                "channel": "slack",
                "run_id": "r1",
                "item_id": None,
                "detail": said,
                "seq": 99,
                "prev_hash": "p",
                "hash": "h",
            },
        )
    columns = "at, action, actor, channel, run_id, item_id, detail"
    with sqlite3.connect(path) as db:
        rows = db.execute(f"SELECT {columns}, seq FROM audit ORDER BY id").fetchall()
    assert [r[-1] for r in rows] == [1, 2, 99]
    assert rows[0][:-1] == rows[2][:-1]
    assert rows[0][0] == "2026-01-01 09:00:00.000000"  # UTC, SQLAlchemy's text form
    # The two direct rows are the chain's, each bound to the one before it.
    async with store.db.engine.begin() as c:
        await c.execute(AUDIT.delete().where(AUDIT.c.seq == 99))
    verdict = await verify(store.db, key=None)
    assert (verdict.rows, verdict.ok) == (2, True)


async def test_an_append_under_a_lost_lease_writes_nothing(store: SqlStore, path: Path) -> None:
    claimed = await store.claim_run(lease="w", now=T0, lease_seconds=30)
    assert claimed is not None
    with pytest.raises(LeaseLost):
        await store.append_events("r1", [NewEvent(Note())], lease="other", now=T0)
    appended = await store.append_events("r1", [NewEvent(Note())], lease="w", now=T0)
    assert [e.seq for e in appended] == [2]
    assert [row[1] for row in _stored(path)] == [1, 2]


async def test_an_append_waits_for_another_process_holding_the_write_lock(
    store: SqlStore, path: Path
) -> None:
    other = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # SQLite's one write lock, as another process takes it
    released = threading.Event()

    def release() -> None:
        other.execute("COMMIT")
        other.close()
        released.set()

    timer = threading.Timer(0.5, release)
    timer.start()
    try:
        appended = await store.append_events("r1", [NewEvent(Note())], lease=None, now=T0)
    finally:
        timer.join()
    assert released.is_set()
    assert [e.seq for e in appended] == [2]
    assert [row[1] for row in _stored(path)] == [1, 2]
    # Nothing is left half-done on the connection the store keeps using.
    again = await store.append_events("r1", [NewEvent(Note())], lease=None, now=T0)
    assert [e.seq for e in again] == [3]


async def test_the_loop_keeps_running_while_an_append_waits_for_the_lock(
    store: SqlStore, path: Path
) -> None:
    other = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    append = asyncio.create_task(store.append_events("r1", [NewEvent(Note())], lease=None, now=T0))
    await asyncio.sleep(0.4)
    assert not append.done()
    assert ticks >= 10  # the wait is off the loop
    other.execute("COMMIT")
    other.close()
    assert [e.seq for e in await asyncio.wait_for(append, 30)] == [2]
    ticker.cancel()
