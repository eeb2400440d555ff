"""merchant: secrets generated once per deployment (the key of the settlements' idempotency keys), shared
by every replica of the database

Revision ID: m0009
Revises: m0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import UtcDateTime

revision = "m0009"
down_revision = "m0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployment_secrets",
        sa.Column("name", sa.String(40), primary_key=True),
        sa.Column("value", sa.String(128), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("deployment_secrets")
