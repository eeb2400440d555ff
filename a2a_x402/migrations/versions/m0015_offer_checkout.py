"""merchant: the embedded flow's checkout. The checkout JWT a round's terms were offered with (specification
§20.3), stored with the offer: the mandates presented for the round must name exactly this checkout

Revision ID: m0015
Revises: m0014
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0015"
down_revision = "m0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for every offer of a tenant without the embedded flow, for terms the price rule keeps out of it,
    # and for offers made before this revision.
    op.add_column("payment_offers", sa.Column("checkout_jwt", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("payment_offers", "checkout_jwt")
