"""merchant: when an offer's settlement was booked and its task told the outcome, for recovery to find
the offers that lack either without reading the others

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

_UNBOOKED = "state = 'paid' AND booked_at IS NULL"
_UNTOLD = "state IN ('paid', 'failed', 'rejected') AND told_at IS NULL"


def upgrade() -> None:
    with op.batch_alter_table("payment_offers") as batch:
        batch.add_column(sa.Column("booked_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("told_at", sa.DateTime(timezone=True), nullable=True))
    # Offers decided before this revision stay unmarked here: the reconciler's next pass checks each one
    # once against the ledger and the task and marks it, which is exact where a backfill would guess.
    op.create_index(
        "ix_payment_offers_unbooked",
        "payment_offers",
        ["task_id"],
        postgresql_where=sa.text(_UNBOOKED),
        sqlite_where=sa.text(_UNBOOKED),
    )
    op.create_index(
        "ix_payment_offers_untold",
        "payment_offers",
        ["updated_at"],
        postgresql_where=sa.text(_UNTOLD),
        sqlite_where=sa.text(_UNTOLD),
    )


def downgrade() -> None:
    op.drop_index("ix_payment_offers_untold", table_name="payment_offers")
    op.drop_index("ix_payment_offers_unbooked", table_name="payment_offers")
    with op.batch_alter_table("payment_offers") as batch:
        batch.drop_column("told_at")
        batch.drop_column("booked_at")
