"""merchant: the double-entry ledger and the billing-webhook outbox

Ledger: accounts with cumulative totals, immutable journal entries and lines, finalizations, and the
single-row sequence counter that orders ledger facts and webhook events in commit order. An authorization
(chain id, asset, payer, nonce) is booked as a settlement at most once (a partial unique index), and a
settlement is reversed and finalized at most once (unique columns).

Outbox: webhook endpoints per tenant, events (payload bytes stored once), one delivery row per event and
endpoint (leased by workers), and the log of every delivery attempt.

Amounts are `Uint256`: NUMERIC(78, 0) on PostgreSQL, 78-digit zero-padded text on SQLite, so the "amount
is positive" check is written per dialect.

Revision ID: m0002
Revises: m0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from a2a_x402.storage import Uint256

revision = "m0002"
down_revision = "m0001"
branch_labels = None
depends_on = None

_ID = sa.String(40)
_TENANT = sa.String(64)
_ADDRESS = sa.String(42)
_HASH = sa.String(66)


def _time(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _positive(column: str) -> str:
    if op.get_bind().dialect.name == "sqlite":
        return f"{column} <> '{'0' * 78}'"
    return f"{column} > 0"


def upgrade() -> None:
    _ledger()
    _outbox()


def _ledger() -> None:
    op.create_table(
        "ledger_sequence",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("value", sa.BigInteger, nullable=False),
        sa.CheckConstraint("id = 1", name="ck_ledger_sequence_single_row"),
    )
    op.execute("INSERT INTO ledger_sequence (id, value) VALUES (1, 0)")
    op.create_table(
        "ledger_accounts",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("tenant", _TENANT, nullable=False),
        sa.Column("network", sa.String(64), nullable=False),
        sa.Column("asset", _ADDRESS, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("holder", _ADDRESS, nullable=False),
        sa.Column("normal_side", sa.String(6), nullable=False),
        sa.Column("debits_posted", Uint256(), nullable=False),
        sa.Column("credits_posted", Uint256(), nullable=False),
        _time("created_at"),
        sa.UniqueConstraint("tenant", "network", "asset", "kind", "holder", name="uq_ledger_accounts_key"),
        sa.CheckConstraint("kind IN ('revenue', 'payer')", name="ck_ledger_accounts_kind"),
        sa.CheckConstraint(
            "(kind = 'revenue' AND normal_side = 'credit') OR (kind = 'payer' AND normal_side = 'debit')",
            name="ck_ledger_accounts_normal_side",
        ),
    )
    op.create_table(
        "ledger_entries",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("sequence", sa.BigInteger, nullable=False, unique=True),
        sa.Column("tenant", _TENANT, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reverses_entry_id", _ID, sa.ForeignKey("ledger_entries.id"), nullable=True, unique=True),
        sa.Column("reason", sa.String(255), nullable=True),
        sa.Column("task_id", sa.String(255), nullable=False),
        sa.Column("context_id", sa.String(255), nullable=False),
        sa.Column("payer", _ADDRESS, nullable=False),
        sa.Column("pay_to", _ADDRESS, nullable=False),
        sa.Column("asset", _ADDRESS, nullable=False),
        sa.Column("network", sa.String(64), nullable=False),
        sa.Column("chain_id", sa.BigInteger, nullable=False),
        sa.Column("nonce", _HASH, nullable=False),
        sa.Column("amount", Uint256(), nullable=False),
        sa.Column("tx_hash", _HASH, nullable=False),
        sa.Column("block_number", sa.BigInteger, nullable=False),
        _time("effective_at"),
        _time("booked_at"),
        sa.CheckConstraint(_positive("amount"), name="ck_ledger_entries_amount_positive"),
        sa.CheckConstraint(
            "(kind = 'settlement' AND reverses_entry_id IS NULL AND reason IS NULL)"
            " OR (kind = 'reversal' AND reverses_entry_id IS NOT NULL AND reason IS NOT NULL)",
            name="ck_ledger_entries_kind",
        ),
    )
    op.create_index(
        "uq_ledger_entries_authorization",
        "ledger_entries",
        ["chain_id", "asset", "payer", "nonce"],
        unique=True,
        postgresql_where=sa.text("kind = 'settlement'"),
        sqlite_where=sa.text("kind = 'settlement'"),
    )
    op.create_index("ix_ledger_entries_tenant_sequence", "ledger_entries", ["tenant", "sequence"])
    op.create_table(
        "ledger_lines",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("entry_id", _ID, sa.ForeignKey("ledger_entries.id"), nullable=False),
        sa.Column("account_id", _ID, sa.ForeignKey("ledger_accounts.id"), nullable=False),
        sa.Column("direction", sa.String(6), nullable=False),
        sa.Column("amount", Uint256(), nullable=False),
        sa.Column("balance_after", Uint256(), nullable=False),
        sa.CheckConstraint("direction IN ('debit', 'credit')", name="ck_ledger_lines_direction"),
        sa.CheckConstraint(_positive("amount"), name="ck_ledger_lines_amount_positive"),
    )
    op.create_index("ix_ledger_lines_entry_id", "ledger_lines", ["entry_id"])
    op.create_index("ix_ledger_lines_account_id", "ledger_lines", ["account_id"])
    op.create_table(
        "ledger_finalizations",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("entry_id", _ID, sa.ForeignKey("ledger_entries.id"), nullable=False, unique=True),
        sa.Column("sequence", sa.BigInteger, nullable=False, unique=True),
        sa.Column("confirmations", sa.Integer, nullable=False),
        _time("finalized_at"),
        _time("recorded_at"),
        sa.CheckConstraint("confirmations >= 1", name="ck_ledger_finalizations_confirmations"),
    )


def _outbox() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("tenant", _TENANT, nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("event_types", sa.JSON, nullable=False),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("previous_secret", sa.String(128), nullable=True),
        _time("previous_secret_expires_at", nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("disabled_reason", sa.String(255), nullable=True),
        _time("created_at"),
        _time("updated_at"),
        sa.UniqueConstraint("tenant", "url", name="uq_webhook_endpoints_tenant_url"),
        sa.CheckConstraint("status IN ('active', 'disabled')", name="ck_webhook_endpoints_status"),
    )
    op.create_table(
        "webhook_events",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("tenant", _TENANT, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("sequence", sa.BigInteger, nullable=False, unique=True),
        sa.Column("payload", sa.LargeBinary, nullable=False),
        _time("created_at"),
    )
    op.create_index("ix_webhook_events_tenant_sequence", "webhook_events", ["tenant", "sequence"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("event_id", _ID, sa.ForeignKey("webhook_events.id"), nullable=False),
        sa.Column("endpoint_id", _ID, sa.ForeignKey("webhook_endpoints.id"), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("round_start", sa.Integer, nullable=False),
        _time("next_attempt_at", nullable=True),
        _time("lease_until", nullable=True),
        sa.Column("lease_token", sa.String(32), nullable=True),
        sa.Column("last_status_code", sa.Integer, nullable=True),
        sa.Column("last_error", sa.String(255), nullable=True),
        _time("delivered_at", nullable=True),
        _time("created_at"),
        _time("updated_at"),
        sa.UniqueConstraint("event_id", "endpoint_id", name="uq_webhook_deliveries_event_endpoint"),
        sa.CheckConstraint(
            "status IN ('pending', 'delivered', 'failed')", name="ck_webhook_deliveries_status"
        ),
    )
    op.create_index("ix_webhook_deliveries_due", "webhook_deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_webhook_deliveries_endpoint_id", "webhook_deliveries", ["endpoint_id"])
    op.create_table(
        "webhook_attempts",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("delivery_id", _ID, sa.ForeignKey("webhook_deliveries.id"), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("worker", sa.String(64), nullable=False),
        _time("started_at"),
        sa.Column("latency_ms", sa.Integer, nullable=True),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("error", sa.String(255), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        _time("next_attempt_at", nullable=True),
        sa.CheckConstraint(
            "outcome IN ('delivered', 'retry', 'failed', 'disabled')", name="ck_webhook_attempts_outcome"
        ),
    )
    op.create_index("ix_webhook_attempts_delivery_id", "webhook_attempts", ["delivery_id"])


def downgrade() -> None:
    for table in (
        "webhook_attempts",
        "webhook_deliveries",
        "webhook_events",
        "webhook_endpoints",
        "ledger_finalizations",
        "ledger_lines",
        "ledger_entries",
        "ledger_accounts",
        "ledger_sequence",
    ):
        op.drop_table(table)
