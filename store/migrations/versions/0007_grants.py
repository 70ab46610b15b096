"""Grants: an approval that says "don't ask again for this run / for a while / for these
exact arguments" is kept as a row, revocable and audited

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "grants",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("skill", sa.String(length=200), nullable=False),
        sa.Column("tool", sa.String(length=300), nullable=False),
        sa.Column("choice", sa.String(length=32), nullable=False),
        sa.Column("granted_by", sa.String(length=300), nullable=False),
        sa.Column("granted_via", sa.String(length=32), nullable=False),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("item_id", sa.String(length=32), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("args", sa.JSON(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(length=300), nullable=True),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id"),
    )
    op.create_index("ix_grants_skill_tool", "grants", ["skill", "tool"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_grants_skill_tool", table_name="grants")
    op.drop_table("grants")
