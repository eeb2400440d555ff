"""merchant: the reconciler's differences with a lifecycle, and the chain's genesis block it last saw

`reconcile_differences` holds each disagreement between the records and the chain that a reconcile pass
found, once per (kind, key) (a payment's key is its payer and nonce): when it was first and last seen,
and its state: open until the chain resolves it (the reason is in `note`) or an operator acknowledges it
or books it to a tenant. `reconcile_chain` holds the genesis block hash of the chain a pass last read,
so that a restarted dev chain is recognised once instead of as a reorg of every booking.

Revision ID: m0012
Revises: m0011
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0012"
down_revision = "m0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reconcile_differences",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(64), nullable=True),
        sa.Column("pay_to", sa.String(42), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("facts", sa.Text, nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.String(64), nullable=True),
        sa.UniqueConstraint("kind", "key", name="uq_reconcile_differences_kind_key"),
    )
    op.create_index("ix_reconcile_differences_state", "reconcile_differences", ["state"])
    op.create_table(
        "reconcile_chain",
        sa.Column("chain_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("genesis_hash", sa.String(66), nullable=False),
        sa.Column("restarted_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("reconcile_chain")
    op.drop_index("ix_reconcile_differences_state", "reconcile_differences")
    op.drop_table("reconcile_differences")
