"""merchant: when an offer's settlement was booked and its task told the outcome, and a partial index per
recovery query, for recovery to find the offers that need it without reading the others; `verifying`
offers become `working`

Revision ID: m0004
Revises: m0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0004"
down_revision = "m0003"
branch_labels = None
depends_on = None

_UNFINISHED = "state IN ('working', 'settling')"
_UNBOOKED = "state = 'paid' AND booked_at IS NULL"
_UNTOLD = "state IN ('paid', 'failed', 'rejected') AND told_at IS NULL"
# (name, column, predicate): one per recovery query.
_PARTIAL_INDEXES = (
    ("ix_payment_offers_unfinished", "updated_at", _UNFINISHED),
    ("ix_payment_offers_unbooked", "task_id", _UNBOOKED),
    ("ix_payment_offers_untold", "updated_at", _UNTOLD),
)


def upgrade() -> None:
    with op.batch_alter_table("payment_offers") as batch:
        batch.add_column(sa.Column("booked_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("told_at", sa.DateTime(timezone=True), nullable=True))
    # Offers decided before this revision stay unmarked here: the reconciler's next pass checks each one
    # once against the ledger and the task and marks it, which is exact where a backfill would guess.
    # A taken payment is `working` from the moment it is taken: `verifying` was the same state for
    # recovery (nothing settled yet) and one more write per paid task.
    op.execute("UPDATE payment_offers SET state = 'working' WHERE state = 'verifying'")
    # Each recovery query gets a partial index as small as the work left; one on the state alone grows
    # with every offer ever paid, and SQLite's planner prefers it to the partial ones.
    op.drop_index("ix_payment_offers_state", table_name="payment_offers")
    for name, column, predicate in _PARTIAL_INDEXES:
        op.create_index(
            name,
            "payment_offers",
            [column],
            postgresql_where=sa.text(predicate),
            sqlite_where=sa.text(predicate),
        )


def downgrade() -> None:
    for name, _, _ in _PARTIAL_INDEXES:
        op.drop_index(name, table_name="payment_offers")
    op.create_index("ix_payment_offers_state", "payment_offers", ["state"])
    with op.batch_alter_table("payment_offers") as batch:
        batch.drop_column("told_at")
        batch.drop_column("booked_at")
