"""merchant: the embedded flow in the books (§20.6), and the evidence kept for disputes

`ledger_entries` gains the AP2 references of a payment made with mandates, written with its entry and
NULL for every other payment (and every entry made before this revision): `ap2_checkout_hash`, the hash
of the round's checkout JWT (the payment mandate's `transaction_id`); `ap2_payment_ref`, the closed payment
mandate's reference (the payment receipt's `reference`); `ap2_open_mandate`, the key of the open payment
mandate it counted against (the usage record's). All three are base64url SHA-256, 43 characters.

`ap2_evidence` keeps, per round whose mandates were accepted, the checkout JWT, the compact closed mandates
as presented and, once the round ends, the AP2 receipts: AP2's evidence in a dispute. The mandates hold
personal data (their disclosures) and credentials, so the rows are purged after `X402_AP2_EVIDENCE_DAYS`.

Revision ID: m0017
Revises: m0016
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0017"
down_revision = "m0016"
branch_labels = None
depends_on = None

_REFERENCES = ("ap2_checkout_hash", "ap2_payment_ref", "ap2_open_mandate")


def upgrade() -> None:
    for name in _REFERENCES:
        op.add_column("ledger_entries", sa.Column(name, sa.String(43), nullable=True))
    op.create_table(
        "ap2_evidence",
        sa.Column("task_id", sa.String(64), primary_key=True),
        sa.Column("round", sa.Integer, primary_key=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("checkout_jwt", sa.Text, nullable=False),
        sa.Column("checkout_mandate", sa.Text, nullable=False),
        sa.Column("payment_mandate", sa.Text, nullable=False),
        sa.Column("checkout_receipt", sa.Text, nullable=True),
        sa.Column("payment_receipt", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    # The purge reads the rows past their retention.
    op.create_index("ix_ap2_evidence_created_at", "ap2_evidence", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_ap2_evidence_created_at", table_name="ap2_evidence")
    op.drop_table("ap2_evidence")
    for name in reversed(_REFERENCES):
        op.drop_column("ledger_entries", name)
