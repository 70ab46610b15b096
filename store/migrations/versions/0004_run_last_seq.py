"""runs.last_seq: the run's newest event number, so an append is one fenced UPDATE

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 12:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN, never a batch (copy-and-move) on SQLite: dropping the old `runs`
    # table there would cascade to every run's events and items.
    op.add_column(
        "runs", sa.Column("last_seq", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    op.execute(
        "UPDATE runs SET last_seq = COALESCE("
        "(SELECT MAX(events.seq) FROM events WHERE events.run_id = runs.id), 0)"
    )


def downgrade() -> None:
    op.drop_column("runs", "last_seq")
