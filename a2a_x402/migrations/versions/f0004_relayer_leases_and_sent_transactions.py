"""facilitator: relayer key leases (one process per key at a time) and every transaction sent for a claim
(a fee-bumped replacement shares its original's nonce; whichever of them is mined is the settlement)

Revision ID: f0004
Revises: f0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import UtcDateTime

revision = "f0004"
down_revision = "f0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "relayer_leases",
        sa.Column("chain_id", sa.BigInteger, primary_key=True),
        sa.Column("relayer", sa.String(42), primary_key=True),
        sa.Column("holder", sa.String(80), nullable=False),
        sa.Column("lease_until", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
    )
    op.create_table(
        "settlement_transactions",
        sa.Column("tx_hash", sa.String(66), primary_key=True),
        sa.Column("claim_id", sa.String(40), sa.ForeignKey("settlement_claims.id"), nullable=False),
        sa.Column("relayer", sa.String(42), nullable=False),
        sa.Column("relayer_nonce", sa.BigInteger, nullable=False),
        sa.Column("max_fee_per_gas", sa.BigInteger, nullable=False),
        sa.Column("max_priority_fee_per_gas", sa.BigInteger, nullable=False),
        sa.Column("raw_tx", sa.Text, nullable=False),
        sa.Column("sent_at", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_settlement_transactions_claim_id", "settlement_transactions", ["claim_id"])


def downgrade() -> None:
    op.drop_index("ix_settlement_transactions_claim_id", "settlement_transactions")
    op.drop_table("settlement_transactions")
    op.drop_table("relayer_leases")
