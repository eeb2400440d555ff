"""facilitator: the reconciler's reread of recent successes by index, however many claims have succeeded

Revision ID: f0003
Revises: f0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "f0003"
down_revision = "f0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # `ix_settlement_claims_state` alone leads to every succeeded claim; this one to those of recent blocks.
    op.create_index(
        "ix_settlement_claims_succeeded_block",
        "settlement_claims",
        ["block_number"],
        postgresql_where=sa.text("state = 'succeeded'"),
        sqlite_where=sa.text("state = 'succeeded'"),
    )


def downgrade() -> None:
    op.drop_index("ix_settlement_claims_succeeded_block", table_name="settlement_claims")
