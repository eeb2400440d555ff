"""merchant: the bounds a tenant set itself on its callers' unpaid work, through its billing API

`tenant_unpaid_limits` holds one row per tenant that set any: the most tasks awaiting payment per caller,
the most left unpaid per caller and minute, the retention of unpaid tasks (each null where the tenant leaves
the operator's). The operator's bounds stay a ceiling: the merchant applies the lower of the two.

Revision ID: m0013
Revises: m0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0013"
down_revision = "m0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenant_unpaid_limits",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("max_awaiting", sa.Integer, nullable=True),
        sa.Column("max_per_minute", sa.Integer, nullable=True),
        sa.Column("retention_s", sa.Integer, nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tenant_unpaid_limits")
