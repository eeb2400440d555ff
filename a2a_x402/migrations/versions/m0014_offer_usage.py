"""merchant: what a metered task's work reported it used, stored with its offer before it is settled, so a
settlement finished by recovery charges exactly what the paid turn measured

Revision ID: m0014
Revises: m0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0014"
down_revision = "m0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for every fixed-price offer, and for offers made before this revision (none of them metered).
    with op.batch_alter_table("payment_offers") as batch:
        batch.add_column(sa.Column("usage", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("payment_offers") as batch:
        batch.drop_column("usage")
