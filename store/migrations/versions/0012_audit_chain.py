"""The audit chain: each audit row's place, the previous row's hash and its own; the chain's
head; signed checkpoints. The rows already there are chained in the order they were written.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 10:00:00.000000
"""

from collections.abc import Sequence
from types import SimpleNamespace

import sqlalchemy as sa
from alembic import op

from pizzabot.store.chain import GENESIS, hash_of

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _chain_existing() -> tuple[int, str]:
    """Hash every row already written, oldest first; the head's place and hash."""
    bind = op.get_bind()
    audit = sa.table(
        "audit",
        sa.column("id", sa.Integer),
        sa.column("at", sa.DateTime(timezone=True)),
        sa.column("action", sa.String),
        sa.column("actor", sa.String),
        sa.column("channel", sa.String),
        sa.column("run_id", sa.String),
        sa.column("item_id", sa.String),
        sa.column("detail", sa.JSON),
        sa.column("seq", sa.BigInteger),
        sa.column("prev_hash", sa.String),
        sa.column("hash", sa.String),
    )
    prev, seq = GENESIS, 0
    rows = bind.execute(sa.select(audit).order_by(audit.c.id)).fetchall()
    for row in rows:
        seq += 1
        h = hash_of(SimpleNamespace(**{**row._mapping, "seq": seq}), prev=prev)
        bind.execute(
            audit.update().where(audit.c.id == row.id).values(seq=seq, prev_hash=prev, hash=h)
        )
        prev = h
    return seq, prev


def upgrade() -> None:
    with op.batch_alter_table("audit") as batch:
        batch.add_column(sa.Column("seq", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("prev_hash", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("hash", sa.String(length=64), nullable=True))
    seq, head = _chain_existing()
    with op.batch_alter_table("audit") as batch:
        batch.alter_column("seq", existing_type=sa.BigInteger(), nullable=False)
        batch.alter_column("prev_hash", existing_type=sa.String(length=64), nullable=False)
        batch.alter_column("hash", existing_type=sa.String(length=64), nullable=False)
    head_table = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(head_table, [{"id": 1, "seq": seq, "hash": head}])
    op.create_table(
        "audit_checkpoints",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mac", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("audit_checkpoints")
    op.drop_table("audit_head")
    with op.batch_alter_table("audit") as batch:
        batch.drop_column("hash")
        batch.drop_column("prev_hash")
        batch.drop_column("seq")
