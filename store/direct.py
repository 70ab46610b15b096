"""Statements sent on the database driver itself, past SQLAlchemy's execution layer, for the
statements every step of a run sends (its appends to the run's log) and every audited action
(the audit chain's next row, `pizzabot.store.chain`).

Executing a statement through SQLAlchemy (on asyncpg a greenlet for the call; on both the
compiled cache's lookup, the DB-API cursor adapter, the result's processing) costs several
times what the database does for it: on SQLite an append's UPDATE … RETURNING and INSERT take
~0.2 ms through it and a fraction of that on `sqlite3` itself. A `Direct` is the same
SQLAlchemy statement, compiled once by the engine's own dialect (the same SQL text), and bound
through its columns' own bind processors (a timestamp's check and conversion to UTC, a JSON
column's serializer), so what reaches the database is what SQLAlchemy would have sent.

On PostgreSQL `Database.direct` sends it in autocommit on a connection of the engine's pool,
where asyncpg keeps it prepared. On SQLite `sqlite_rows` and `sqlite_many` send it on the
`sqlite3` connection under a transaction SQLAlchemy began (`pizzabot.store.database`), which
commits or rolls it back as it does any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect

__all__ = ["Direct", "compiled", "sqlite_many", "sqlite_rows"]


class Direct:
    """A statement compiled once for one dialect whose parameters are positional."""

    def __init__(self, statement: Any, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert compiled.positiontup is not None, f"{dialect.name}'s parameters are positional"
        self.sql: str = compiled.string
        self._compiled = compiled
        binds = compiled.binds
        self._order: list[tuple[str, Callable[[Any], Any] | None]] = [
            (name, binds[name].type._cached_bind_processor(dialect))
            for name in compiled.positiontup
        ]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """The driver's positional arguments for `params` (by the statement's parameter
        names), with the statement's own literals, each through its type's bind processor."""
        values = self._compiled.construct_params(dict(params))
        return [
            values[name] if process is None else process(values[name])
            for name, process in self._order
        ]


_COMPILED: dict[tuple[Any, Dialect], Direct] = {}


def compiled(statement: Any, dialect: Dialect) -> Direct:
    """`statement` compiled for `dialect`, once per process (statements here are built once,
    at import, so the cache holds a few dozen)."""
    key = (statement, dialect)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = Direct(statement, dialect)
    return found


def sqlite_rows(c: Connection, statement: Any, params: Mapping[str, Any]) -> list[Any]:
    """SQLite: run `statement` on `c`'s `sqlite3` connection, in `c`'s transaction; every row
    it returns (read to the end, so the statement is finished before the commit)."""
    direct = compiled(statement, c.dialect)
    raw: Any = c.connection.driver_connection
    rows: list[Any] = raw.execute(direct.sql, direct.args(params)).fetchall()
    return rows


def sqlite_many(c: Connection, statement: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """SQLite: run `statement` once for each of `rows` on `c`'s `sqlite3` connection, in
    `c`'s transaction."""
    direct = compiled(statement, c.dialect)
    raw: Any = c.connection.driver_connection
    raw.executemany(direct.sql, [direct.args(row) for row in rows])
