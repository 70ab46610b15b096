"""The away store's contract, on SQLite and PostgreSQL: an away state is kept (one per
person), read back by another store on the same database (a restart, another worker), ended
by saying one is back or by its time, and every change audited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pizzabot.agent.policy.away import Away
from pizzabot.store.away import SqlAway
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect
from tests.conftest import fresh_pg_database

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'pizzabot.db'}"
    else:
        async with fresh_pg_database() as url:
            yield url


async def test_away_is_kept_shared_ended_and_audited(database_url: str) -> None:
    first = SqlStore(connect(database_url))
    await upgrade(first.engine)
    try:
        book = SqlAway(first.db)
        until = T0 + timedelta(days=3)
        await book.set(Away("alice", "bob", until, "owner", T0))
        # Set again: the newer one replaces it.
        await book.set(Away("alice", "carol", until, "alice", T0 + timedelta(minutes=1)))
        await book.set(Away("dave", "bob", T0 + timedelta(hours=1), "owner", T0))

        second = SqlStore(connect(database_url))  # another process on the same database
        try:
            other = SqlAway(second.db)
            now = await other.current(T0 + timedelta(minutes=5))
            assert [(a.person, a.delegate, a.until) for a in now] == [
                ("alice", "carol", until),
                ("dave", "bob", T0 + timedelta(hours=1)),
            ]
            # Dave's away ends by itself; alice says she is back.
            later = T0 + timedelta(hours=2)
            assert [a.person for a in await other.current(later)] == ["alice"]
            ended = await other.back("alice", by="alice", now=later)
            assert ended is not None and ended.delegate == "carol"
            assert await other.back("alice", by="alice", now=later) is None
            assert await other.back("dave", by="owner", now=later) is None
            assert await book.current(later) == []
        finally:
            await second.aclose()
        actions = [(e.action, e.detail.get("person")) for e in await first.audit_log()]
        assert actions[:4] == [
            ("away_ended", "alice"),
            ("away_set", "dave"),
            ("away_set", "alice"),
            ("away_set", "alice"),
        ]
    finally:
        await first.aclose()
