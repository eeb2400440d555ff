"""merchant: when a paid offer's settlement was booked, so recovery scans only the unbooked ones

Revision ID: m0004
Revises: m0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0004"
down_revision = "m0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("payment_offers") as batch:
        batch.add_column(sa.Column("booked_at", sa.DateTime(timezone=True), nullable=True))
    # Offers already paid stay unbooked here: the reconciler's next pass checks each against the ledger
    # once and marks it, which is exact where a backfill from this migration would have to guess.
    op.create_index(
        "ix_payment_offers_unbooked",
        "payment_offers",
        ["task_id"],
        postgresql_where=sa.text("state = 'paid' AND booked_at IS NULL"),
        sqlite_where=sa.text("state = 'paid' AND booked_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_payment_offers_unbooked", table_name="payment_offers")
    with op.batch_alter_table("payment_offers") as batch:
        batch.drop_column("booked_at")
