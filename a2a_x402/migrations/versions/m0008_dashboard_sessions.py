"""merchant: dashboard sessions as server records, so that logging out ends a session for good

A session cookie holds a random id; the row is found by its SHA-256 (`id_hash`), so the table holds no
usable cookie. `token_mac` is an HMAC of the tenant's API token keyed with the session id: a new token
ends every session without the table holding anything derived from the token alone. A row is revoked
at log-out and expires after the session TTL; expired and revoked rows are deleted at later log-ins.

Revision ID: m0008
Revises: m0007
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import UtcDateTime

revision = "m0008"
down_revision = "m0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("token_mac", sa.String(64), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.Column("revoked_at", UtcDateTime(), nullable=True),
    )
    op.create_index("ix_dashboard_sessions_expires_at", "dashboard_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_expires_at", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
