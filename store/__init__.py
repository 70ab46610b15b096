"""Persistence for the engine: SQLAlchemy tables, the `SqlStore`, and Alembic migrations.

SQLite (embedded, the default) and PostgreSQL (to scale out) run the same code; the store
contract tests (`tests/contract/`) hold both to the behaviour `pizzabot.agent.store.Store`
promises, and `tests/unit/test_sql_store.py` tests what only SQL does (old rows, migrations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pizzabot.store.sql import SqlStore, connect

__all__ = ["SqlStore", "connect"]


def __getattr__(name: str) -> Any:
    # Loaded when first asked for: every `pizzabot` command loads `pizzabot.store.admin` (the
    # server-side commands), and a client command must not pay for SQLAlchemy.
    if name in __all__:
        from pizzabot.store import sql

        return getattr(sql, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
