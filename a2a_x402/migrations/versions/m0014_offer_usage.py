"""merchant: metered payments. What a metered task's work reported it used, stored with its offer before it
is settled, so a settlement finished by recovery charges exactly what the paid turn measured; and a booked
metered settlement's maximum (what the payer signed for), beside the amount settled

Revision ID: m0014
Revises: m0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import Uint256

revision = "m0014"
down_revision = "m0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE, never a batch's copy of the table: the ledger's other tables hold foreign keys to
    # its entries, which a copy would break on SQLite. NULL for every fixed-price offer and booking, and for
    # those made before this revision (none of them metered).
    op.add_column("payment_offers", sa.Column("usage", sa.JSON, nullable=True))
    op.add_column("ledger_entries", sa.Column("maximum", Uint256(), nullable=True))


def downgrade() -> None:
    op.drop_column("ledger_entries", "maximum")
    op.drop_column("payment_offers", "usage")
