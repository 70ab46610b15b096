"""A first start makes its database from the tables' declarations, not by running every
migration: the database must come out as the migrations make it, on SQLite and PostgreSQL,
later starts and migrations must take it as theirs, and first starts at once (a server and a
CLI) must not both make it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, inspect, text

from pizzabot.store.migrate import alembic_config, head_revision, upgrade
from pizzabot.store.sql import connect
from tests.conftest import fresh_pg_database


@pytest.fixture(params=["sqlite", "postgres"])
async def two_urls(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[str]]:
    """Two empty databases of one kind."""
    if request.param == "sqlite":
        yield [f"sqlite+aiosqlite:///{tmp_path / name}" for name in ("a.db", "b.db")]
        return
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(fresh_pg_database()) for _ in range(2)]


def _shape(c: Connection) -> dict[str, Any]:
    """Every table's columns, keys, indexes and rows, as the database reports them."""
    seen = inspect(c)
    out: dict[str, Any] = {}
    for table in sorted(seen.get_table_names()):
        out[table] = {
            "columns": sorted(
                (col["name"], str(col["type"]), col["nullable"], str(col.get("default")))
                for col in seen.get_columns(table)
            ),
            "primary key": seen.get_pk_constraint(table)["constrained_columns"],
            "foreign keys": sorted(
                (
                    tuple(fk["constrained_columns"]),
                    fk["referred_table"],
                    tuple(fk["referred_columns"]),
                    str(fk.get("options", {}).get("ondelete")),
                )
                for fk in seen.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (
                    ix["name"],
                    tuple(str(n) for n in ix["column_names"]),
                    bool(ix["unique"]),
                    # A partial index's condition (the outbox's look depends on its words).
                    sorted((k, str(v)) for k, v in ix.get("dialect_options", {}).items()),
                )
                for ix in seen.get_indexes(table)
            ),
            "unique": sorted(
                (str(u["name"]), tuple(u["column_names"]))
                for u in seen.get_unique_constraints(table)
            ),
            "rows": sorted(repr(tuple(r)) for r in c.execute(text(f'SELECT * FROM "{table}"'))),
        }
    return out


def _migrate(c: Connection) -> None:
    from alembic import command

    command.upgrade(alembic_config(c), "head")


async def test_a_new_database_is_what_the_migrations_make(two_urls: list[str]) -> None:
    created, migrated = (connect(url) for url in two_urls)
    try:
        assert await upgrade(created) == f"created (schema {head_revision()})"
        async with migrated.begin() as conn:
            await conn.run_sync(_migrate)
        async with created.connect() as a, migrated.connect() as b:
            made, ran = await a.run_sync(_shape), await b.run_sync(_shape)
        assert list(made) == list(ran)
        for table in ran:
            assert made[table] == ran[table], table
        assert ran["audit_head"]["rows"]  # the migrations' seeded row is among what is compared

        # Alembic takes the new database as its own: at the head, nothing to do.
        assert await upgrade(created) is None
        async with created.begin() as conn:
            await conn.run_sync(_migrate)
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
        assert version == [(head_revision(),)]
    finally:
        await created.dispose()
        await migrated.dispose()


_START = """
import asyncio, sys
from pizzabot.store.migrate import upgrade
from pizzabot.store.sql import connect

async def main() -> None:
    engine = connect(sys.argv[1])
    sys.stdin.readline()  # every process imported: go together
    try:
        print(repr(await upgrade(engine)))
    finally:
        await engine.dispose()

asyncio.run(main())
"""


async def test_first_starts_at_once_make_one_database_and_all_go_on(
    two_urls: list[str],
) -> None:
    url = two_urls[0]
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _START,
            url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(4)
    ]
    await asyncio.sleep(2.0)  # let each import before it is told to go
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
    said = [await asyncio.wait_for(proc.communicate(), 60) for proc in procs]
    errors = [
        err.decode()[-500:] for proc, (_, err) in zip(procs, said, strict=True) if proc.returncode
    ]
    assert errors == []
    answers = sorted(out.decode().strip() for out, _ in said)
    assert answers == [f"'created (schema {head_revision()})'", "None", "None", "None"]
