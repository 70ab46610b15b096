"""A statement sent on asyncpg itself, past SQLAlchemy's execution layer, for the statements
every step of a run sends.

Executing a statement through SQLAlchemy on asyncpg (a greenlet for the call, the compiled
cache's lookup, the DB-API cursor adapter, the result's processing) costs about as much CPU
as the round trip itself. A `Direct` is the same SQLAlchemy statement, compiled once by the
engine's own dialect (the same SQL text, its parameters cast to their columns' types), and
bound through its columns' own bind processors (a timestamp's check and conversion to UTC);
`Database.direct` sends it in autocommit on a connection of the engine's pool, where asyncpg
keeps it prepared, and runs it again on a fresh connection under the rule every unit of work
follows (`pizzabot.store.database`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.engine import Dialect

__all__ = ["Direct"]


class Direct:
    """A statement compiled for asyncpg once, to be sent with `Database.direct`."""

    def __init__(self, statement: Any, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert compiled.positiontup is not None, "asyncpg's dialect numbers its parameters"
        self.sql: str = compiled.string
        self._compiled = compiled
        binds = compiled.binds
        self._order: list[tuple[str, Callable[[Any], Any] | None]] = [
            (name, binds[name].type._cached_bind_processor(dialect))
            for name in compiled.positiontup
        ]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """asyncpg's positional arguments for `params` (by the statement's parameter names),
        with the statement's own literals, each through its type's bind processor."""
        values = self._compiled.construct_params(dict(params))
        return [
            values[name] if process is None else process(values[name])
            for name, process in self._order
        ]
