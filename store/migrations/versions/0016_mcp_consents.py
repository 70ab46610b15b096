"""MCP OAuth consents waiting for their callback, shared by every server and worker.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 05:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_consents",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("skill", sa.String(length=100), nullable=False),
        sa.Column("server", sa.String(length=100), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("code", sa.Text(), nullable=True),
        sa.Column("iss", sa.Text(), nullable=True),
        sa.Column("error", sa.String(length=40), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index(
        op.f("ix_mcp_consents_expires_at"), "mcp_consents", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_mcp_consents_expires_at"), table_name="mcp_consents")
    op.drop_table("mcp_consents")
