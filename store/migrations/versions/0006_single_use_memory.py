"""Single-use memory: webhook signatures accepted once, web sessions ended by logout

A captured webhook could be sent again within its timestamp's tolerance, and a logged-out
session cookie kept working until it expired. Both are now remembered in the database, so
every server sharing it refuses them; each row carries the time after which it is of no use
(`expires_at`, indexed for pruning).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "hook_signatures",
        sa.Column("signature", sa.String(length=64), nullable=False),
        sa.Column("hook", sa.String(length=200), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("signature"),
    )
    op.create_index(
        op.f("ix_hook_signatures_expires_at"), "hook_signatures", ["expires_at"], unique=False
    )
    op.create_table(
        "web_sessions_ended",
        sa.Column("sid", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sid"),
    )
    op.create_index(
        op.f("ix_web_sessions_ended_expires_at"),
        "web_sessions_ended",
        ["expires_at"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_web_sessions_ended_expires_at"), table_name="web_sessions_ended")
    op.drop_table("web_sessions_ended")
    op.drop_index(op.f("ix_hook_signatures_expires_at"), table_name="hook_signatures")
    op.drop_table("hook_signatures")
