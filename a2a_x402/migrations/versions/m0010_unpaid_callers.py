"""merchant: who asked for each offer (the caller of the request that priced its task), so unpaid work is
bounded per caller; and an index of the unpaid offers the purge looks for

Revision ID: m0010
Revises: m0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0010"
down_revision = "m0009"
branch_labels = None
depends_on = None

_UNPAID = "state IN ('offered', 'rejected')"


def upgrade() -> None:
    # Offers made before this revision have no caller: they count for nobody's limit, and are purged alike.
    op.create_table(
        "payment_offer_callers",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("caller", sa.String(320), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(
        "ix_payment_offer_callers_caller", "payment_offer_callers", ["tenant", "caller", "created_at"]
    )
    op.create_index(
        "ix_payment_offers_unpaid",
        "payment_offers",
        ["updated_at"],
        postgresql_where=sa.text(_UNPAID),
        sqlite_where=sa.text(_UNPAID),
    )


def downgrade() -> None:
    op.drop_index("ix_payment_offers_unpaid", table_name="payment_offers")
    op.drop_index("ix_payment_offer_callers_caller", table_name="payment_offer_callers")
    op.drop_table("payment_offer_callers")
