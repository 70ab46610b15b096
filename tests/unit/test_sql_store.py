"""What only the SQL store does, on SQLite and on PostgreSQL: rows older versions wrote, the
migrations, and its own helpers beside the protocols (`claim_run`, `close_items`,
`dead_letters`). What every backend does is the store contract, in `tests/contract/`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from pizzabot.agent.addresses import EmailRef, EmailTarget, SlackRef, SlackTarget
from pizzabot.agent.events import NewEvent, Note, RunStarted
from pizzabot.agent.model import Box, DeliveryStatus, Item, ItemKind, ItemStatus, RunStatus
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import SqlStore, connect

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SqlStore]:
    engine = connect(db_url)
    await upgrade(engine)
    s = SqlStore(engine)
    yield s
    await s.aclose()


async def _waiting_item(store: SqlStore, targets: list[SlackTarget | EmailTarget]) -> None:
    """Run r1, claimed by "w", waits on its pending item i1, delivered to `targets`."""
    await store.create_run(
        run_id="r1",
        skill="s",
        input="hi",
        trigger="test",
        now=T0,
        events=[NewEvent(RunStarted(input="hi"))],
    )
    claimed = await store.claim_run(lease="w", now=T0, lease_seconds=30)
    assert claimed is not None and claimed.lease_owner == "w"
    item = Item(
        id="i1",
        run_id="r1",
        skill="s",
        box=Box.ACTION,
        kind=ItemKind.TOOL,
        status=ItemStatus.PENDING,
        title="t",
        body="b",
        created_at=T0,
        call_id="c1",
        tool="crm.send",
        args={"to": "a"},
    )
    await store.create_item(item, targets=targets, lease="w", now=T0, run_status=RunStatus.WAITING)


async def test_refs_written_before_they_were_typed_still_load(store: SqlStore) -> None:
    from sqlalchemy import Connection, update

    from pizzabot.store.tables import DeliveryRow

    await _waiting_item(store, [SlackTarget("C1"), EmailTarget("a@x")])
    # The JSON earlier versions stored: no kind, the external id under "id".
    old = {
        "slack": {"channel": "C1", "ts": "171.5", "thread_ts": "170.1", "id": "171.5"},
        "email": {"id": "<m1@bot>", "thread": "<m0@bot>", "address": "a@x"},
    }

    def write(c: Connection) -> None:
        for channel, ref in old.items():
            c.execute(
                update(DeliveryRow)
                .where(DeliveryRow.channel == channel)
                .values(ref=ref, external_id=ref["id"], status=DeliveryStatus.SENT.value)
            )

    await store.db.run(write)
    slack, email = await store.deliveries("i1")
    assert slack.ref == SlackRef(channel="C1", ts="171.5", thread_ts="170.1")
    assert email.ref == EmailRef(message_id="<m1@bot>", thread="<m0@bot>", address="a@x")
    found = await store.find_delivery("email", "<m1@bot>")
    assert found is not None and found.id == email.id


async def test_close_items_closes_a_runs_pending_actions(store: SqlStore) -> None:
    await _waiting_item(store, [])
    closed = await store.close_items("r1", status=ItemStatus.CANCELLED, now=T0)
    assert [i.status for i in closed] == [ItemStatus.CANCELLED]
    assert await store.close_items("r1", status=ItemStatus.CANCELLED, now=T0) == []


async def test_dead_letters_are_counted_by_channel(store: SqlStore) -> None:
    await _waiting_item(store, [SlackTarget("C1"), SlackTarget("C2"), EmailTarget("a@x")])
    slack = await store.due_deliveries(now=T0, channels=["slack"])
    assert await store.dead_letters() == {}
    await store.delivery_failed(slack[0].id, error="down", retry_at=None, now=T0)
    assert await store.dead_letters() == {"slack": 1}


async def test_the_outbox_looks_only_at_the_deliveries_it_has_work_on(store: SqlStore) -> None:
    # Every delivery ever sent stays in the table, and the outbox looks at every wake-up (each
    # decision): its looks must read the partial index of the few it has work on, not them
    # all. SQLite is left without statistics, as a server leaves it; PostgreSQL's autovacuum
    # gathers them, as ANALYZE does here.
    await _waiting_item(store, [SlackTarget("C1")])
    sent = text(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000) "
        "INSERT INTO deliveries (id, item_id, run_id, channel, address, status, attempts, "
        "needs_update, created_at, updated_at) SELECT 'd' || x, 'i1', 'r1', 'slack', 'C1', "
        "'sent', 0, false, :at, :at FROM n"
    )
    engine = store.db.engine
    postgres = engine.dialect.name == "postgresql"
    async with engine.begin() as c:
        await c.execute(sent, {"at": T0})
        if postgres:
            await c.execute(text("ANALYZE"))
    looks: list[tuple[str, Any]] = []

    def seen(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().startswith("SELECT") and "FROM deliveries" in statement:
            looks.append((statement, params))

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        assert len(await store.due_deliveries(now=T0, channels=["slack"])) == 1
        # The dispatcher's look for channels this server does not have (none here: only
        # Slack has work), then one that finds Slack's delivery among the others.
        assert await store.due_deliveries(now=T0, except_channels=["slack", "email"]) == []
        assert len(await store.due_deliveries(now=T0, except_channels=["email"])) == 1
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert len(looks) == 4
    for statement, params in looks:  # as sent, with their parameters
        async with engine.connect() as c:
            explain = "EXPLAIN " if postgres else "EXPLAIN QUERY PLAN "
            plan = await c.exec_driver_sql(explain + statement, params)
            said = " ".join(str(cell) for row in plan for cell in row)
        assert "ix_deliveries_work" in said, said


async def test_a_database_from_before_last_seq_numbers_on_after_its_events(db_url: str) -> None:
    from alembic import command
    from sqlalchemy import text

    from pizzabot.store.migrate import alembic_config

    engine = connect(db_url)
    async with engine.begin() as conn:
        await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "0003"))
        await conn.execute(
            text(
                "INSERT INTO runs (id, skill, status, input, trigger, created_at, updated_at,"
                " tokens, cost_usd, steps, cost_known, budget_extra) VALUES ('old', 's',"
                " 'done', 'hi', 'test', :t, :t, 0, 0, 0, true, '{}')"
            ),
            {"t": T0},
        )
        for seq in (1, 2, 3):
            await conn.execute(
                text(
                    "INSERT INTO events (run_id, seq, kind, data, at, version)"
                    " VALUES ('old', :seq, 'note', '{}', :t, 1)"
                ),
                {"seq": seq, "t": T0},
            )
    await upgrade(engine)
    store = SqlStore(engine)
    try:
        added = await store.append_events("old", [NewEvent(Note())], lease=None, now=T0)
        assert [e.seq for e in added] == [4]
        # The upgrade kept what was there (a copy-and-move of `runs` would cascade it away).
        assert [e.seq for e in await store.events("old")] == [1, 2, 3, 4]
    finally:
        await store.aclose()


async def test_migrations_produce_exactly_the_models(db_url: str) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from pizzabot.store.migrate import alembic_config
    from pizzabot.store.tables import Base

    engine = connect(db_url)
    # Every migration, run (a first start makes a new database from the tables instead).
    async with engine.begin() as conn:
        await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "head"))
    assert await upgrade(engine) is None  # a start then migrates nothing and does not fail
    async with engine.connect() as conn:
        diff = await conn.run_sync(
            lambda c: compare_metadata(
                MigrationContext.configure(c, opts={"compare_type": True}), Base.metadata
            )
        )
    await engine.dispose()
    assert diff == []


def test_the_quick_head_check_agrees_with_alembic() -> None:
    from alembic.script import ScriptDirectory

    from pizzabot.store.migrate import alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
