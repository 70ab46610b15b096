"""PostgreSQL coordinates processes: NOTIFY wakes listeners on commit, and an advisory lock
lets exactly one holder run a singleton, handing over when the holder goes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from pizzabot.agent.events import NewEvent, Note, RunStarted
from pizzabot.store.migrate import upgrade
from pizzabot.store.pg import Leadership, RunListener
from pizzabot.store.sql import SqlStore, connect
from tests.conftest import pg_url_for
from tests.waiting import eventually

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[SqlStore]:
    engine = connect(pg_url)
    await upgrade(engine)
    store = SqlStore(engine)
    yield store
    await store.aclose()


async def test_a_new_run_wakes_a_listener_in_another_connection_naming_the_run(
    pg_store: SqlStore,
) -> None:
    heard: list[str | None] = []
    named = asyncio.Event()

    def wake(run_id: str | None) -> None:
        heard.append(run_id)
        if run_id is not None:
            named.set()

    listener = asyncio.create_task(RunListener(pg_store.engine, wake, retry=0.1).run_forever())
    try:
        # The listener's own catch-up wake at connect names no run: everyone looks.
        await eventually(lambda: heard == [None], what="the listener's catch-up wake at connect")
        await pg_store.create_run(
            run_id="r1",
            skill="s",
            input="",
            trigger="t",
            now=T0,
            events=[NewEvent(RunStarted())],
        )
        async with asyncio.timeout(10):
            await named.wait()
        assert heard == [None, "r1"]
    finally:
        listener.cancel()


async def test_only_one_leader_runs_a_singleton_and_another_takes_over(pg_store: SqlStore) -> None:
    running: list[str] = []

    def work_for(name: str) -> object:
        async def work() -> None:
            running.append(name)
            await asyncio.Event().wait()

        return work

    first = Leadership(pg_store.engine, "outbox", work_for("a"), retry=0.1)  # type: ignore[arg-type]
    second = Leadership(pg_store.engine, "outbox", work_for("b"), retry=0.1)  # type: ignore[arg-type]
    a = asyncio.create_task(first.run_forever())
    await eventually(lambda: running == ["a"], what="the first to lead")
    assert not await _refused(pg_store)  # the leader holds the lock it asked for
    b = asyncio.create_task(second.run_forever())
    await eventually(lambda: _refused(pg_store), what="the second to be refused the lock")
    assert running == ["a"] and first.leading and not second.leading
    a.cancel()  # the leader goes away, and its connection (and lock) with it
    await eventually(lambda: running == ["a", "b"], what="the second to take over")
    assert second.leading
    b.cancel()


async def _refused(store: SqlStore) -> bool:
    """Whether a connection has asked for an advisory lock, been told no, and holds none."""
    async with store.engine.connect() as conn:
        found = await conn.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity a"
                " WHERE a.datname = current_database() AND a.state = 'idle'"
                " AND a.query LIKE 'SELECT pg_try_advisory_lock%'"
                " AND NOT EXISTS (SELECT 1 FROM pg_locks l"
                " WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)"
            )
        )
    return bool(found)


async def _drop_connections(url: str) -> int:
    """What a PostgreSQL restart does to a process's pooled connections: each backend ends
    (waited for), and its client hears so while the pool holds it, before it is used again."""
    import asyncpg

    database = url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(pg_url_for("postgres", driver="postgresql"))
    try:
        dropped = await admin.fetch(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
    finally:
        await admin.close()
    return len(dropped)


async def test_connections_the_server_dropped_cost_no_transaction(
    pg_store: SqlStore, pg_url: str
) -> None:
    from pizzabot.store.triggers import TriggerStore

    triggers = TriggerStore(pg_store)
    await pg_store.create_run(run_id="r0", skill="s", input="", trigger="t", now=T0, events=[])
    # Each kind of transaction (ORM session, plain connection, a trigger's block) meets a
    # pooled connection the server has dropped, as after a restart, and still goes through.
    assert await _drop_connections(pg_url) >= 1
    await pg_store.create_run(run_id="r1", skill="s", input="", trigger="t", now=T0, events=[])
    assert await _drop_connections(pg_url) >= 1
    appended = await pg_store.append_events("r0", [NewEvent(Note())], lease=None, now=T0)
    assert [e.seq for e in appended] == [1]
    assert await _drop_connections(pg_url) >= 1
    assert await triggers.list_schedules() == []
    assert {r.id for r in await pg_store.list_runs()} == {"r0", "r1"}
