"""facilitator: a claim's valid_before holds any time the wire allows (a uint64 and more), not a signed
64-bit integer, so a correctly signed authorization valid until 2**63 or later can be claimed and settled

Revision ID: f0002
Revises: f0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import Uint256

revision = "f0002"
down_revision = "f0001"
branch_labels = None
depends_on = None

# Uint256 keeps SQLite values as 78-digit zero-padded text (its order is then the numeric order).
_PADDING = "0" * 78


def upgrade() -> None:
    with op.batch_alter_table("settlement_claims") as batch:
        batch.alter_column(
            "valid_before",
            type_=Uint256(),
            existing_type=sa.BigInteger(),
            existing_nullable=False,
            postgresql_using="valid_before::numeric(78, 0)",
        )
    if op.get_bind().dialect.name == "sqlite":
        # The table copy turned each integer into its plain decimal text; pad it as Uint256 writes it.
        pad = sa.text("UPDATE settlement_claims SET valid_before = substr(:zeros || valid_before, -78, 78)")
        op.execute(pad.bindparams(zeros=_PADDING))


def downgrade() -> None:
    # Fails, changing nothing, while a claim holds a valid_before beyond a signed 64-bit integer.
    with op.batch_alter_table("settlement_claims") as batch:
        batch.alter_column(
            "valid_before",
            type_=sa.BigInteger(),
            existing_type=Uint256(),
            existing_nullable=False,
            postgresql_using="valid_before::bigint",
        )
