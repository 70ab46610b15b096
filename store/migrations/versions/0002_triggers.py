"""triggers: schedules, schedule fires, item timers

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 12:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("skill", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("cron", sa.String(length=200), nullable=True),
        sa.Column("every_seconds", sa.Float(), nullable=True),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("misfire", sa.String(length=16), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("active_since", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "schedule_fires",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("schedule_id", sa.String(length=64), nullable=False),
        sa.Column("fire_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=32), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("schedule_id", "fire_time", name="ux_schedule_fires_schedule_time"),
    )
    with op.batch_alter_table("schedule_fires", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_schedule_fires_schedule_id"), ["schedule_id"], unique=False
        )

    op.create_table(
        "item_timers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("item_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "kind", name="ux_item_timers_item_kind"),
    )


def downgrade() -> None:
    op.drop_table("item_timers")
    with op.batch_alter_table("schedule_fires", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_schedule_fires_schedule_id"))

    op.drop_table("schedule_fires")
    op.drop_table("schedules")
