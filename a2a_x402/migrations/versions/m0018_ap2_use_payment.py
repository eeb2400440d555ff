"""merchant: a mandate use names the payment it was presented with

`ap2_mandate_uses.payment_hash` is the `payload_hash` (as `payment_offers` names a payment taken) of the
payment presented with the mandates. A round's end confirms the use only if the payment the round took is
that one, and the books carry its references only for that payment: two payments presented for one round,
one with mandates and one without, can no longer charge the mandates for the other. NULL for uses made
before this revision, which are decided as before.

Revision ID: m0018
Revises: m0017
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0018"
down_revision = "m0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("ap2_mandate_uses", sa.Column("payment_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ap2_mandate_uses") as batch:
        batch.drop_column("payment_hash")
