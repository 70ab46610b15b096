"""`pizzabot.store.database`: how the connections behind every store transaction are set up."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import AsyncExitStack

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from pizzabot.store.database import Database, connect


def _one(sql: str) -> Callable[[Connection], object]:
    def fn(c: Connection) -> object:
        return c.execute(text(sql)).scalar()

    return fn


async def test_sqlite_connections_keep_a_small_page_cache(sqlite_url: str) -> None:
    db = Database(connect(sqlite_url))
    try:
        assert await db.run(_one("PRAGMA cache_size")) == -1024  # KiB, not SQLite's 2 MiB
        assert await db.run(_one("PRAGMA journal_mode")) == "wal"
        assert await db.run(_one("PRAGMA synchronous")) == 1  # NORMAL
    finally:
        await db.aclose()


def _size(path: str) -> int:
    return os.stat(path).st_size


async def test_sqlite_log_is_checkpointed_when_quiet_not_in_a_commit(sqlite_url: str) -> None:
    path = make_url(sqlite_url).database
    assert path is not None
    db = Database(connect(sqlite_url))
    try:
        await db.run(lambda c: c.execute(text("CREATE TABLE t (x blob)")))
        await db.run(_one("PRAGMA wal_checkpoint(TRUNCATE)"))  # start from an empty log
        before = _size(path)

        def write(c: Connection) -> None:
            # 8 MiB: well past SQLite's own checkpoint mark of 1,000 pages (4 MiB).
            for _ in range(8):
                c.execute(text("INSERT INTO t VALUES (randomblob(1048576))"))

        await db.run(write)
        # The commit left the pages in the log: the database file has not grown.
        assert _size(path) == before
        assert await db.run(_one("PRAGMA wal_autocheckpoint")) == 10_000
        for _ in range(200):
            if _size(path) > before + 8 * 1024 * 1024:
                break
            await asyncio.sleep(0.05)
        # Once nothing was written for a moment, the log was copied into the file.
        assert _size(path) > before + 8 * 1024 * 1024
    finally:
        await db.aclose()


@pytest.mark.postgres
async def test_postgres_takes_the_connection_returned_last(pg_url: str) -> None:
    db = Database(connect(pg_url))
    try:
        pids = []
        async with AsyncExitStack() as held:
            for _ in range(3):
                conn = await held.enter_async_context(db.engine.connect())
                pids.append((await conn.execute(text("SELECT pg_backend_pid()"))).scalar())
        # The stack returned them last to first, so the first one went back last: it is the
        # warm one, and sequential transactions keep to it.
        assert len(set(pids)) == 3
        for _ in range(3):
            assert await db.run(_one("SELECT pg_backend_pid()")) == pids[0]
    finally:
        await db.aclose()


@pytest.mark.postgres
async def test_a_postgres_read_takes_no_transaction_of_its_own(pg_url: str) -> None:
    def two_clocks(c: Connection) -> tuple[object, object]:
        # now() is the start of the statement's transaction.
        return c.execute(text("SELECT now()")).scalar(), c.execute(text("SELECT now()")).scalar()

    db = Database(connect(pg_url))
    try:
        await db.run(lambda c: c.execute(text("CREATE TABLE t (x int)")))
        await db.run(lambda c: c.execute(text("INSERT INTO t VALUES (1)")))
        assert await db.read(_one("SELECT count(*) FROM t")) == 1
        first, second = await db.read(two_clocks)
        assert first != second  # each statement was a transaction of its own
        first, second = await db.run(two_clocks)
        assert first == second
    finally:
        await db.aclose()
