"""The ledger's tables as SQLAlchemy 2 models. The schema itself is made only by migration m0002.

Chart of accounts (one set per tenant, network and asset):

    kind      holder          normal side   meaning
    revenue   "" (tenant)     credit        what the tenant has earned: credits - debits
    payer     payer address   debit         what this payer has paid the tenant: debits - credits

A settlement debits the payer's account and credits the tenant's revenue account; a reversal does the
opposite. Money enters the books from the payer accounts (they play Formance's "world" account, one per
payer so a tenant can see who paid), and every entry stays inside one tenant.

`ledger_entries`, `ledger_lines` and `ledger_finalizations` are append-only: the code has no UPDATE or
DELETE path for them; corrections are new entries. `ledger_accounts` carries cumulative totals, a
projection of its lines updated in the same transaction as the lines (see `_ledger.py`), and
`ledger_unfinalized` the settlements neither finalized nor reversed yet, a projection of the facts kept the
same way, so the reconciler's watch list costs what is left to watch, not the size of the books.
`ledger_sequence` is a single-row counter that orders every ledger fact (and every webhook event) in commit
order.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from a2a_x402.storage import Uint256, UtcDateTime

__all__ = [
    "LedgerAccount",
    "LedgerBase",
    "LedgerEntry",
    "LedgerFinalization",
    "LedgerLine",
    "LedgerSequence",
    "LedgerUnfinalized",
]

_ID = sa.String(40)
_TENANT = sa.String(64)
_ADDRESS = sa.String(42)
_HASH = sa.String(66)
_AP2_REFERENCE = sa.String(43)  # base64url of a SHA-256, unpadded
_TIME = UtcDateTime()


class LedgerBase(DeclarativeBase):
    """Declarative base of the ledger's tables."""


class LedgerSequence(LedgerBase):
    """The single row (id 1) holding the last sequence number handed out."""

    __tablename__ = "ledger_sequence"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    value: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)


class LedgerAccount(LedgerBase):
    """One account of the chart above, with its cumulative posted totals in atomic units."""

    __tablename__ = "ledger_accounts"
    __table_args__ = (
        sa.UniqueConstraint("tenant", "network", "asset", "kind", "holder", name="uq_ledger_accounts_key"),
    )

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    tenant: Mapped[str] = mapped_column(_TENANT, nullable=False)
    network: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    asset: Mapped[str] = mapped_column(_ADDRESS, nullable=False)
    kind: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    holder: Mapped[str] = mapped_column(_ADDRESS, nullable=False)
    normal_side: Mapped[str] = mapped_column(sa.String(6), nullable=False)
    debits_posted: Mapped[int] = mapped_column(Uint256(), nullable=False)
    credits_posted: Mapped[int] = mapped_column(Uint256(), nullable=False)
    created_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)


class LedgerEntry(LedgerBase):
    """An immutable journal entry: a settlement, or the reversal of one.

    A reversal repeats the reversed settlement's details (payer, authorization, transaction) so statements
    read on their own; `effective_at` is when the settlement happened on chain, or when the reorg that
    undid it was seen.
    """

    __tablename__ = "ledger_entries"
    __table_args__ = (
        sa.Index(
            "uq_ledger_entries_authorization",
            "chain_id",
            "asset",
            "payer",
            "nonce",
            unique=True,
            postgresql_where=sa.text("kind = 'settlement'"),
            sqlite_where=sa.text("kind = 'settlement'"),
        ),
        sa.Index("ix_ledger_entries_tenant_sequence", "tenant", "sequence"),
        # A statement reads one tenant's window of booking time.
        sa.Index("ix_ledger_entries_tenant_booked_at", "tenant", "booked_at"),
        # The reconciler reads the settlements of recent blocks, and those of the nonces it saw on chain.
        sa.Index(
            "ix_ledger_entries_settlement_block",
            "chain_id",
            "asset",
            "block_number",
            postgresql_where=sa.text("kind = 'settlement'"),
            sqlite_where=sa.text("kind = 'settlement'"),
        ),
        sa.Index(
            "ix_ledger_entries_settlement_nonce",
            "chain_id",
            "asset",
            "nonce",
            postgresql_where=sa.text("kind = 'settlement'"),
            sqlite_where=sa.text("kind = 'settlement'"),
        ),
    )

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    sequence: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, unique=True)
    tenant: Mapped[str] = mapped_column(_TENANT, nullable=False)
    kind: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    reverses_entry_id: Mapped[str | None] = mapped_column(
        _ID, sa.ForeignKey("ledger_entries.id"), nullable=True, unique=True
    )
    reason: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    task_id: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    context_id: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    payer: Mapped[str] = mapped_column(_ADDRESS, nullable=False)
    pay_to: Mapped[str] = mapped_column(_ADDRESS, nullable=False)
    asset: Mapped[str] = mapped_column(_ADDRESS, nullable=False)
    network: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    chain_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    nonce: Mapped[str] = mapped_column(_HASH, nullable=False)
    amount: Mapped[int] = mapped_column(Uint256(), nullable=False)
    # A metered payment's maximum (what the payer signed for, `amount` being what was settled); else NULL.
    maximum: Mapped[int | None] = mapped_column(Uint256(), nullable=True)
    tx_hash: Mapped[str] = mapped_column(_HASH, nullable=False)
    block_number: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    effective_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)
    booked_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)
    # A payment made with AP2 mandates (§20): its references (`Ap2References`, migration m0017); else NULL.
    ap2_checkout_hash: Mapped[str | None] = mapped_column(_AP2_REFERENCE, nullable=True)
    ap2_payment_ref: Mapped[str | None] = mapped_column(_AP2_REFERENCE, nullable=True)
    ap2_open_mandate: Mapped[str | None] = mapped_column(_AP2_REFERENCE, nullable=True)


class LedgerLine(LedgerBase):
    """One side of an entry: a debit or credit of `amount` on an account, and the account's balance after."""

    __tablename__ = "ledger_lines"

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    entry_id: Mapped[str] = mapped_column(_ID, sa.ForeignKey("ledger_entries.id"), nullable=False, index=True)
    account_id: Mapped[str] = mapped_column(
        _ID, sa.ForeignKey("ledger_accounts.id"), nullable=False, index=True
    )
    direction: Mapped[str] = mapped_column(sa.String(6), nullable=False)
    amount: Mapped[int] = mapped_column(Uint256(), nullable=False)
    balance_after: Mapped[int] = mapped_column(Uint256(), nullable=False)


class LedgerFinalization(LedgerBase):
    """The fact that a settlement reached its confirmation depth (at most one per entry)."""

    __tablename__ = "ledger_finalizations"

    id: Mapped[str] = mapped_column(_ID, primary_key=True)
    entry_id: Mapped[str] = mapped_column(
        _ID, sa.ForeignKey("ledger_entries.id"), nullable=False, unique=True
    )
    sequence: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, unique=True)
    confirmations: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    finalized_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)
    recorded_at: Mapped[datetime] = mapped_column(_TIME, nullable=False)


class LedgerUnfinalized(LedgerBase):
    """A settlement neither finalized nor reversed yet: written with its booking, removed with the fact that
    ends its watch."""

    __tablename__ = "ledger_unfinalized"

    entry_id: Mapped[str] = mapped_column(_ID, sa.ForeignKey("ledger_entries.id"), primary_key=True)
    sequence: Mapped[int] = mapped_column(sa.BigInteger, nullable=False, unique=True)
