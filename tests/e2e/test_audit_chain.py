"""The audit chain on real databases (SQLite and PostgreSQL): it holds as written, names the
first row edited, removed or swapped by hand with raw SQL, catches a chain whose hashes were
all recomputed through its signed checkpoints, and stays one chain under many writers."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, select, text

from pizzabot.store.chain import write_checkpoint
from pizzabot.store.chain_verify import export, verify
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.conftest import fresh_pg_database

KEY = bytes(range(32))
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlStore]:
    engine = connect(db_url)
    await upgrade(engine)
    s = SqlStore(engine)
    yield s
    await s.aclose()


async def write(store: SqlStore, n: int, *, start: int = 0) -> None:
    for k in range(start, start + n):
        await store.audit(
            action="decision",
            actor=f"person{k}@x.example",
            channel="web",
            now=T0 + timedelta(minutes=k),
            run_id=f"run{k}",
            item_id=f"item{k}",
            detail={"decision": "approve", "args_after": {"n": k, "note": "ünïcode"}},
        )


async def sql(store: SqlStore, statement: str, **params: object) -> None:
    await store.db.run(lambda c: c.execute(text(statement), params))


async def checkpoint(store: SqlStore, at: datetime) -> None:
    await store.db.run(lambda c: write_checkpoint(c, key=KEY, now=at))


async def ids(store: SqlStore) -> list[int]:
    return await store.db.read(
        lambda c: [r.id for r in c.execute(text("SELECT id FROM audit ORDER BY id"))]
    )


async def test_the_chain_holds_as_written_and_exports_its_hashes(store: SqlStore) -> None:
    await write(store, 5)
    await checkpoint(store, T0 + timedelta(hours=1))
    await checkpoint(store, T0 + timedelta(hours=2))  # nothing new: no second checkpoint
    await write(store, 3, start=5)
    await checkpoint(store, T0 + timedelta(hours=3))
    verdict = await verify(store.db, key=KEY)
    assert verdict.ok, verdict
    assert (verdict.rows, verdict.checkpoints) == (8, 2)
    rows = [r async for r in export(store.db)]
    assert [r["seq"] for r in rows] == list(range(1, 9))
    assert all(a["hash"] == b["prev_hash"] for a, b in itertools.pairwise(rows))
    later = [r async for r in export(store.db, since=T0 + timedelta(minutes=6))]
    assert [r["actor"] for r in later] == ["person6@x.example", "person7@x.example"]
    # The wrong key: every checkpoint is named, the rows still hold.
    wrong = await verify(store.db, key=b"k" * 32)
    assert wrong.first_bad is None and len(wrong.bad_checkpoints) == 2


async def test_an_edited_row_is_named(store: SqlStore) -> None:
    await write(store, 6)
    third = (await ids(store))[2]
    await sql(store, "UPDATE audit SET actor = 'mallory@x.example' WHERE id = :i", i=third)
    verdict = await verify(store.db, key=KEY)
    assert verdict.first_bad is not None
    assert verdict.first_bad.startswith(f"audit row {third} ")
    assert "edited" in verdict.first_bad


async def test_a_deleted_row_is_named_by_the_row_after_it(store: SqlStore) -> None:
    await write(store, 6)
    rows = await ids(store)
    await sql(store, "DELETE FROM audit WHERE id = :i", i=rows[3])
    verdict = await verify(store.db, key=KEY)
    assert verdict.first_bad is not None
    assert verdict.first_bad.startswith(f"audit row {rows[4]} ")
    assert "chain place 4 were removed" in verdict.first_bad


async def test_the_newest_row_deleted_is_seen_from_the_head(store: SqlStore) -> None:
    await write(store, 4)
    rows = await ids(store)
    await sql(store, "DELETE FROM audit WHERE id = :i", i=rows[-1])
    verdict = await verify(store.db, key=KEY)
    assert verdict.first_bad is not None and "newest row(s)" in verdict.first_bad
    assert f"audit row {rows[-2]} " in verdict.first_bad


async def test_two_rows_swapped_are_named(store: SqlStore) -> None:
    """Swap every column but the id of rows 2 and 3: the order of the table changes."""
    await write(store, 5)
    a, b = (await ids(store))[1:3]
    cols = "at, action, actor, channel, run_id, item_id, detail, seq, prev_hash, hash"
    await sql(
        store, f"CREATE TABLE swap AS SELECT id, {cols} FROM audit WHERE id IN (:a, :b)", a=a, b=b
    )
    sets = ", ".join(
        f"{c} = (SELECT {c} FROM swap WHERE swap.id = :other)" for c in cols.split(", ")
    )
    await store.db.run(
        lambda c: [
            c.execute(text(f"UPDATE audit SET {sets} WHERE id = :me"), {"me": me, "other": other})
            for me, other in ((a, b), (b, a))
        ]
    )
    await sql(store, "DROP TABLE swap")
    verdict = await verify(store.db, key=KEY)
    assert verdict.first_bad is not None
    assert verdict.first_bad.startswith(f"audit row {a} ")
    assert "out of order" in verdict.first_bad and f"row {b}" in verdict.first_bad


async def test_a_chain_rehashed_after_an_edit_fails_its_checkpoint(store: SqlStore) -> None:
    """Whoever can write the database can recompute every hash, but cannot sign."""
    from pizzabot.store.chain import AUDIT, GENESIS, hash_of

    await write(store, 4)
    await checkpoint(store, T0 + timedelta(hours=1))
    await sql(store, "UPDATE audit SET actor = 'mallory@x.example' WHERE seq = 2")

    def rehash(c: Connection) -> None:
        prev = GENESIS
        for row in c.execute(select(AUDIT).order_by(AUDIT.c.id)).fetchall():
            h = hash_of(row, prev=prev)
            c.execute(
                text("UPDATE audit SET prev_hash = :p, hash = :h WHERE id = :i"),
                {"p": prev, "h": h, "i": row.id},
            )
            prev = h
        c.execute(text("UPDATE audit_head SET hash = :h"), {"h": prev})

    await store.db.run(rehash)
    verdict = await verify(store.db, key=KEY)
    assert verdict.first_bad is None  # the rows agree with each other …
    assert len(verdict.bad_checkpoints) == 1  # … not with what was signed
    assert "does not match the chain" in verdict.bad_checkpoints[0]


@pytest.mark.postgres
async def test_many_writers_at_once_keep_one_chain_on_postgres() -> None:
    """Eight processes' worth of connections (a store each) write at once: one chain, no gap."""
    async with fresh_pg_database() as url:
        first = SqlStore(connect(url))
        await upgrade(first.engine)
        stores = [first] + [SqlStore(connect(url)) for _ in range(7)]
        try:
            await asyncio.gather(*(write(s, 25, start=100 * k) for k, s in enumerate(stores)))
            verdict = await verify(first.db, key=None)
            assert verdict.ok, verdict
            assert verdict.rows == 200
            rows = [r async for r in export(first.db)]
            assert sorted(r["seq"] for r in rows) == list(range(1, 201))
            assert [r["seq"] for r in rows] == list(range(1, 201))  # id order is chain order
        finally:
            for s in stores:
                await s.aclose()


async def test_the_upgrade_chains_the_rows_already_there(db_url: str) -> None:
    """A database from before the chain: its audit rows are chained, oldest first, as they
    were, and what is written after goes on from them."""
    from alembic import command

    from pizzabot.store.migrate import alembic_config

    engine = connect(db_url)
    async with engine.begin() as conn:
        await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "0011"))
        for k in range(3):
            await conn.execute(
                text(
                    "INSERT INTO audit (at, action, actor, channel, run_id, item_id, detail)"
                    " VALUES (:t, 'kill', :who, 'cli', NULL, NULL, :d)"
                ),
                {"t": T0 + timedelta(seconds=k), "who": f"old{k}", "d": '{"reason": "é"}'},
            )
    await upgrade(engine)
    store = SqlStore(engine)
    try:
        await write(store, 2)
        verdict = await verify(store.db, key=None)
        assert verdict.ok and verdict.rows == 5, verdict
        old = [r async for r in export(store.db)][:3]
        assert [(r["seq"], r["actor"], r["detail"]) for r in old] == [
            (k + 1, f"old{k}", {"reason": "é"}) for k in range(3)
        ]
    finally:
        await store.aclose()


async def test_checkpoints_are_signed_at_start_and_then_every_period(store: SqlStore) -> None:
    """The loop with an injected clock and sleep: one checkpoint per period that saw writes."""
    from pizzabot.store.chain import keep_checkpointing

    await write(store, 2)
    periods: list[float] = []
    ticks = iter(T0 + timedelta(hours=h) for h in range(10))

    async def sleep(seconds: float) -> None:
        periods.append(seconds)
        if len(periods) == 1:
            await write(store, 1, start=2)  # written in the first period
        if len(periods) == 3:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await keep_checkpointing(
            store.db, key=KEY, every=60.0, clock=lambda: next(ticks), sleep=sleep
        )
    assert periods == [60.0, 60.0, 60.0]
    cps = await store.db.read(
        lambda c: [
            tuple(r) for r in c.execute(text("SELECT seq FROM audit_checkpoints ORDER BY id"))
        ]
    )
    assert cps == [(2,), (3,)]
    assert (await verify(store.db, key=KEY)).ok


def test_the_key_file_is_made_owner_only_and_never_shown(tmp_path: Path) -> None:
    import stat

    from pizzabot.store.chain import ChainError, ensure_key, read_key

    path = tmp_path / "audit-key"
    key = ensure_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(key) == 32
    assert ensure_key(path) == key  # kept, not made again
    path.write_text("not hex at all, and a secret")
    with pytest.raises(ChainError) as err:
        read_key(path)
    assert "secret" not in str(err.value) and str(path) in str(err.value)


def _write_from_another_process(url: str, start: int) -> None:
    async def go() -> None:
        s = SqlStore(connect(url))
        try:
            await write(s, 200, start=start)
        finally:
            await s.aclose()

    asyncio.run(go())


async def test_processes_writing_one_sqlite_file_at_once_keep_one_chain(tmp_path: Path) -> None:
    import multiprocessing

    url = f"sqlite+aiosqlite:///{tmp_path / 'pizzabot.db'}"
    engine = connect(url)
    await upgrade(engine)
    await engine.dispose()
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_write_from_another_process, args=(url, 1000 * k)) for k in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        await asyncio.to_thread(p.join, 120)
        assert p.exitcode == 0
    store = SqlStore(connect(url))
    try:
        verdict = await verify(store.db, key=None)
        assert verdict.ok and verdict.rows == 600, verdict
    finally:
        await store.aclose()
