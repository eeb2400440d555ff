"""facilitator: settlement claims, one row per EIP-3009 authorization ever presented for settlement

Revision ID: f0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import Uint256

revision = "f0001"
down_revision = None
branch_labels = ("facilitator",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "settlement_claims",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
        sa.Column("payer", sa.String(42), nullable=False),
        sa.Column("nonce", sa.String(66), nullable=False),
        sa.Column("idempotency_key", sa.String(255), nullable=True),
        sa.Column("payload_hash", sa.String(64), nullable=False),
        sa.Column("network", sa.String(64), nullable=False),
        sa.Column("pay_to", sa.String(42), nullable=False),
        sa.Column("amount", Uint256(), nullable=False),
        sa.Column("valid_before", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("relayer", sa.String(42), nullable=True),
        sa.Column("relayer_nonce", sa.BigInteger, nullable=True),
        sa.Column("tx_hash", sa.String(66), nullable=True),
        sa.Column("raw_tx", sa.Text, nullable=True),
        sa.Column("block_number", sa.BigInteger, nullable=True),
        sa.Column("block_hash", sa.String(66), nullable=True),
        sa.Column("error_reason", sa.String(80), nullable=True),
        sa.Column("response", sa.JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("chain_id", "asset", "payer", "nonce", name="uq_settlement_claims_authorization"),
        sa.UniqueConstraint("idempotency_key", name="uq_settlement_claims_idempotency_key"),
    )
    op.create_index("ix_settlement_claims_state", "settlement_claims", ["state"])
    op.create_index("ix_settlement_claims_tx_hash", "settlement_claims", ["tx_hash"])


def downgrade() -> None:
    op.drop_table("settlement_claims")
