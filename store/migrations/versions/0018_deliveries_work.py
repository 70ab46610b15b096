"""The deliveries the outbox still has work on (pending, or sent and due an update), indexed
apart by channel and age, so the outbox's look reads those few and not every delivery sent.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_deliveries_work",
            ["channel", "created_at"],
            unique=False,
            sqlite_where=sa.text("status = 'pending' OR needs_update = 1"),
            postgresql_where=sa.text("status = 'pending' OR needs_update = true"),
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_work")
