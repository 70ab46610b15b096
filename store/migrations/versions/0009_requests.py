"""Requests: approvals and questions asked by agents Pizza Bot does not run

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "requests",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=False),
        sa.Column("item_id", sa.String(length=32), nullable=False),
        sa.Column("skill", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("requester", sa.String(length=300), nullable=False),
        sa.Column("idempotency_key", sa.String(length=300), nullable=True),
        sa.Column("body_hash", sa.String(length=64), nullable=False),
        sa.Column("callback_url", sa.String(length=300), nullable=True),
        sa.Column("timeout", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id"),
        sa.UniqueConstraint("requester", "idempotency_key", name="uq_requests_requester_key"),
    )


def downgrade() -> None:
    op.drop_table("requests")
