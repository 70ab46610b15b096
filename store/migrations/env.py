"""Alembic environment: migrations run on the connection `pizzabot.store.migrate` hands over."""

from __future__ import annotations

from alembic import context

from pizzabot.store.tables import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through store.migrate.upgrade(), which passes a connection")
context.configure(
    connection=connection, target_metadata=Base.metadata, render_as_batch=True, compare_type=True
)
with context.begin_transaction():
    context.run_migrations()
