"""Away states: who is away until when, and who decides for them meanwhile.

Revision ID: 0014
Revises: 0012
Create Date: 2026-12-02 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "away",
        sa.Column("person", sa.String(length=200), nullable=False),
        sa.Column("delegate", sa.String(length=200), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("set_by", sa.String(length=300), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("person"),
    )


def downgrade() -> None:
    op.drop_table("away")
