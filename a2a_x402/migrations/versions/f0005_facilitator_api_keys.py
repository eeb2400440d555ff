"""facilitator: API keys of the callers of /verify and /settle (stored as sha256 digests, never in clear),
each with optional rules (allowed payTo addresses and assets, a minimum amount, settlements per minute)

Revision ID: f0005
Revises: f0004
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import UtcDateTime

revision = "f0005"
down_revision = "f0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "facilitator_api_keys",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("rules", sa.JSON, nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("revoked_at", UtcDateTime(), nullable=True),
        sa.UniqueConstraint("digest", name="uq_facilitator_api_keys_digest"),
    )


def downgrade() -> None:
    op.drop_table("facilitator_api_keys")
