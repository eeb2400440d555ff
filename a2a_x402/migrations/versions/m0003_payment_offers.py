"""merchant: payment offers, the terms each priced task was offered and the fate of its payment

Revision ID: m0003
Revises: m0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0003"
down_revision = "m0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "payment_offers",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("context_id", sa.String(64), nullable=False),
        sa.Column("skill", sa.String(128), nullable=False),
        sa.Column("dialect", sa.String(8), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("required", sa.JSON, nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("payer", sa.String(42), nullable=True),
        sa.Column("nonce", sa.String(66), nullable=True),
        sa.Column("payload", sa.JSON, nullable=True),
        sa.Column("payload_hash", sa.String(64), nullable=True),
        sa.Column("accepted", sa.JSON, nullable=True),
        sa.Column("receipts", sa.JSON, nullable=False),
        sa.Column("held_artifacts", sa.JSON, nullable=True),
        sa.Column("error", sa.String(32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        # One authorization pays for one task, even when two tasks race to use it.
        sa.UniqueConstraint("payer", "nonce", name="uq_payment_offers_authorization"),
    )
    op.create_index("ix_payment_offers_state", "payment_offers", ["state"])


def downgrade() -> None:
    op.drop_table("payment_offers")
