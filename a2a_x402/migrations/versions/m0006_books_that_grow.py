"""merchant: queries that stay flat as the books grow: a statement's window, the reconciler's recent
blocks and seen nonces by index, and the settlements it still watches as a list of their own

`ledger_unfinalized` holds the settlements neither finalized nor reversed; the ledger writes it in the
transactions that book, finalize and reverse, so the reconciler reads what is left to watch instead of
anti-joining every settlement ever booked with its finalizations. The upgrade fills it from the facts.

Revision ID: m0006
Revises: m0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "m0006"
down_revision = "m0005"
branch_labels = None
depends_on = None

_SETTLEMENT = "kind = 'settlement'"


def upgrade() -> None:
    op.create_index("ix_ledger_entries_tenant_booked_at", "ledger_entries", ["tenant", "booked_at"])
    for name, column in (
        ("ix_ledger_entries_settlement_block", "block_number"),
        ("ix_ledger_entries_settlement_nonce", "nonce"),
    ):
        op.create_index(
            name,
            "ledger_entries",
            ["chain_id", "asset", column],
            postgresql_where=sa.text(_SETTLEMENT),
            sqlite_where=sa.text(_SETTLEMENT),
        )
    op.create_table(
        "ledger_unfinalized",
        sa.Column("entry_id", sa.String(40), sa.ForeignKey("ledger_entries.id"), primary_key=True),
        sa.Column("sequence", sa.BigInteger, nullable=False, unique=True),
    )
    op.execute(
        "INSERT INTO ledger_unfinalized (entry_id, sequence) "
        "SELECT e.id, e.sequence FROM ledger_entries e WHERE e.kind = 'settlement' "
        "AND NOT EXISTS (SELECT 1 FROM ledger_finalizations f WHERE f.entry_id = e.id) "
        "AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.reverses_entry_id = e.id)"
    )


def downgrade() -> None:
    op.drop_table("ledger_unfinalized")
    for name in (
        "ix_ledger_entries_settlement_nonce",
        "ix_ledger_entries_settlement_block",
        "ix_ledger_entries_tenant_booked_at",
    ):
        op.drop_index(name, table_name="ledger_entries")
