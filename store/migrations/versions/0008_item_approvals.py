"""Two-person approval: each person's counted approval of an item that needs more than one

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 11:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "item_approvals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("item_id", sa.String(length=32), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("person", sa.String(length=300), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("identity", sa.String(length=300), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("edited_from", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "round", "person", name="uq_item_approvals_person"),
    )
    op.create_index(op.f("ix_item_approvals_item_id"), "item_approvals", ["item_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_item_approvals_item_id"), table_name="item_approvals")
    op.drop_table("item_approvals")
