"""Persistence for the engine: SQLAlchemy tables, the `SqlStore`, and Alembic migrations.

SQLite (embedded, the default) and PostgreSQL (to scale out) run the same code; the store
contract tests (`tests/contract/`) hold both to the behaviour `pizzabot.agent.store.Store`
promises, and `tests/unit/test_sql_store.py` tests what only SQL does (old rows, migrations).
"""

from pizzabot.store.sql import SqlStore, connect

__all__ = ["SqlStore", "connect"]
