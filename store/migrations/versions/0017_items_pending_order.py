"""The inbox's items by box and status in the order they are listed (newest first), so a page
of the pending items, and the next page after it, is read from the index, not sorted from all
of them.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 09:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_index("ix_items_box_status")
        batch_op.create_index(
            "ix_items_box_status_created", ["box", "status", "created_at", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_index("ix_items_box_status_created")
        batch_op.create_index("ix_items_box_status", ["box", "status"], unique=False)
