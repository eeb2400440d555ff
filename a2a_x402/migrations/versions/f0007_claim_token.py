"""facilitator: the ERC-20 a Permit2 claim moves (its `asset` is Permit2, whose nonces are the payer's across
every token); empty for an EIP-3009 claim, whose `asset` is the token itself

Revision ID: f0007
Revises: f0006
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "f0007"
down_revision = "f0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("settlement_claims") as batch:
        batch.add_column(sa.Column("token", sa.String(42), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("settlement_claims") as batch:
        batch.drop_column("token")
