"""merchant: callers, the API keys issued per client (stored as the SHA-256 of the token, never the token)

A caller's key is a high-entropy bearer token shown once at creation; the table keeps only its SHA-256, so
a request is authenticated by looking up the hash of what it presents. `name` is the principal its tasks
belong to within `tenant`; a revoked key keeps its row (revoked_at set) so its name is never reissued to
another client, which would hand that client the old one's tasks.

Revision ID: m0011
Revises: m0010
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0011"
down_revision = "m0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "callers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("token_sha256", name="uq_callers_token_sha256"),
        sa.UniqueConstraint("tenant", "name", name="uq_callers_tenant_name"),
    )


def downgrade() -> None:
    op.drop_table("callers")
