"""An FYI's Undo: the compensating call a `notify` item offers, and how far it got.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 06:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.add_column(sa.Column("undo", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("undo_state", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("items") as batch:
        batch.drop_column("undo_state")
        batch.drop_column("undo")
