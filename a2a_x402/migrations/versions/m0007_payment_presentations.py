"""merchant: every authorization presented for a task, bound to that task for good

An authorization presented for a task (refused, expired, rejected or failed included) is never accepted
for any other task or tenant of the deployment: the first presentation of a (payer, nonce) is recorded,
before anything is verified, under a primary key that lets only one task have it. Offers whose payment
was taken before this revision are recorded by the upgrade.

Revision ID: m0007
Revises: m0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0007"
down_revision = "m0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "payment_presentations",
        sa.Column("payer", sa.String(42), nullable=False),
        sa.Column("nonce", sa.String(66), nullable=False),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("presented_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("payer", "nonce", name="pk_payment_presentations"),
    )
    op.execute(
        "INSERT INTO payment_presentations (payer, nonce, task_id, tenant, presented_at) "
        "SELECT payer, nonce, task_id, tenant, COALESCE(taken_at, updated_at) FROM payment_offers "
        "WHERE payer IS NOT NULL AND nonce IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_table("payment_presentations")
