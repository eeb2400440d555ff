"""facilitator: settlements that reverted on chain (payer, wallet code hash, relayer, wei burned), shared
by replicas: their payers cool off and each relayer key's revert budget is counted from them

Revision ID: f0006
Revises: f0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import Uint256, UtcDateTime

revision = "f0006"
down_revision = "f0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "settlement_reverts",
        sa.Column("tx_hash", sa.String(66), primary_key=True),
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("relayer", sa.String(42), nullable=False),
        sa.Column("payer", sa.String(42), nullable=False),
        sa.Column("code_hash", sa.String(66), nullable=True),
        sa.Column("gas_wei", Uint256(), nullable=False),
        sa.Column("reverted_at", UtcDateTime(), nullable=False),
    )
    op.create_index("ix_settlement_reverts_payer", "settlement_reverts", ["chain_id", "payer", "reverted_at"])
    op.create_index(
        "ix_settlement_reverts_code_hash", "settlement_reverts", ["chain_id", "code_hash", "reverted_at"]
    )
    op.create_index(
        "ix_settlement_reverts_relayer", "settlement_reverts", ["chain_id", "relayer", "reverted_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_settlement_reverts_relayer", "settlement_reverts")
    op.drop_index("ix_settlement_reverts_code_hash", "settlement_reverts")
    op.drop_index("ix_settlement_reverts_payer", "settlement_reverts")
    op.drop_table("settlement_reverts")
