"""Bring a database to the newest schema with Alembic, at server start.

Alembic itself costs about a second to import, and the server must answer `/healthz` at
once: when the database already stands at the newest revision (every start but the first
after an upgrade), a single query says so and Alembic is never loaded. An empty database (a
first start) is made from the tables' declarations instead of by running every migration
(Alembic's own advice for a new database: create, then stamp the head), with the rows the
migrations seed and the head revision written as Alembic writes it; a test checks that it
comes out as the migrations make it. On PostgreSQL an advisory lock makes concurrent starts
(a server and its workers) create or migrate one at a time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x50_1221_0B07  # "pizza bot", any constant shared by every process
_REVISION = re.compile(r'^revision(?:: str)? = ["\']([^"\']+)["\']', re.M)
_DOWN = re.compile(r'^down_revision(?:: [^=]+)? = ["\']([^"\']+)["\']', re.M)


def head_revision() -> str:
    """The newest revision, read from the migration files without importing Alembic
    (a test checks it against Alembic's own answer)."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        if m := _REVISION.search(source):
            revisions.add(m.group(1))
        if m := _DOWN.search(source):
            downs.add(m.group(1))
    heads = revisions - downs
    if len(heads) != 1:
        raise RuntimeError(f"the migrations must have one head, found {sorted(heads)}")
    return heads.pop()


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _lock(connection: Connection) -> None:
    """Hold the database for this transaction against other processes' starts."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")  # SQLite's one write lock


def _create_if_empty(connection: Connection) -> bool:
    """Make the schema if the database is empty, under the lock (two first starts on one
    database would both find it empty); whether it did."""
    _lock(connection)
    if inspect(connection).get_table_names():
        return False
    create(connection)
    return True


def _upgrade(connection: Connection) -> str | None:
    """Upgrade; the revision found before (another process may have migrated meanwhile)."""
    if connection.dialect.name == "postgresql":
        _lock(connection)
    before = None
    if inspect(connection).has_table("alembic_version"):
        before = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    from alembic import command

    command.upgrade(alembic_config(connection), "head")
    return before


def create(connection: Connection) -> None:
    """Make the newest schema in an empty database: what running every migration makes."""
    from pizzabot.store.chain import GENESIS, HEAD
    from pizzabot.store.tables import Base

    Base.metadata.create_all(connection)
    # The one row the migrations seed: the audit chain's head, before any audit row.
    connection.execute(HEAD.insert().values(id=1, seq=0, hash=GENESIS))
    # Alembic's own version table, as it makes it, at the head.
    connection.execute(
        text(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL,"
            " CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
    )
    connection.execute(
        text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": head_revision()}
    )


async def current_revision(engine: AsyncEngine) -> str | None:
    try:
        async with engine.connect() as conn:
            return (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    except DBAPIError:
        return None  # a new database: no version table yet


async def upgrade(engine: AsyncEngine) -> str | None:
    """Bring the database to the newest schema. Returns what that took, in words ("created
    (schema 0006)", "upgraded from schema 0003 to 0006"), or None when nothing was to do."""
    head = head_revision()
    if await current_revision(engine) == head:
        return None
    async with engine.begin() as conn:
        if await conn.run_sync(_create_if_empty):
            return f"created (schema {head})"
    async with engine.begin() as conn:
        before = await conn.run_sync(_upgrade)
    if before == head:
        return None
    return (
        f"created (schema {head})" if before is None else f"upgraded from schema {before} to {head}"
    )
