"""merchant: when each offer's payment was taken, so crash recovery can tell a front-runner's settlement
of the payment from an earlier use of the same authorization elsewhere

Revision ID: m0005
Revises: m0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0005"
down_revision = "m0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Offers taken before this revision stay NULL: recovery then refuses a front-run it cannot date, as
    # before, and the reconciler reports the transfer.
    with op.batch_alter_table("payment_offers") as batch:
        batch.add_column(sa.Column("taken_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("payment_offers") as batch:
        batch.drop_column("taken_at")
