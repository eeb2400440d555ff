"""The merchant's double-entry ledger: one immutable journal entry per settled payment, per tenant.

A settlement debits the payer's account and credits the tenant's revenue account (chart of accounts in
`_models.py`); a reorg is corrected by a reversal entry, confirmation depth by a finalization fact, never by
changing an entry. An authorization (chain id, asset, payer, nonce) is booked at most once, enforced by a
unique index, so booking is idempotent. Every fact is handed, in its own transaction, to a
`LedgerEventSink` (the webhook outbox) and carries a per-database sequence number in commit order.

Knows tenants, accounts, amounts and authorizations; nothing of A2A or HTTP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._errors import (
        BookingConflictError,
        EntryNotFoundError,
        EntryNotReversibleError,
        EntryReversedError,
        InvalidBookingError,
        LedgerError,
        LedgerInvariantError,
    )
    from ._invariants import check_invariants
    from ._ledger import Along, Ap2Lookup, Ledger
    from ._models import (
        LedgerAccount,
        LedgerBase,
        LedgerEntry,
        LedgerFinalization,
        LedgerLine,
        LedgerSequence,
    )
    from ._queries import LedgerReader
    from ._records import (
        Ap2References,
        Balance,
        BookedEntry,
        DailyRevenue,
        EntryKind,
        EntryStatus,
        Finalization,
        LedgerEventSink,
        LedgerFact,
        PayerTotal,
        SettlementBooked,
        SettlementBooking,
        SettlementFinalized,
        SettlementRecord,
        SettlementReversed,
        StatementLine,
    )
    from ._sequence import allocate_sequence
    from ._statement import (
        STATEMENT_COLUMNS,
        balances_json,
        format_time,
        spreadsheet_safe,
        statement_csv,
        statement_json,
    )
    from .cli import ledger_cli

__all__ = [
    "STATEMENT_COLUMNS",
    "Along",
    "Ap2Lookup",
    "Ap2References",
    "Balance",
    "BookedEntry",
    "BookingConflictError",
    "DailyRevenue",
    "EntryKind",
    "EntryNotFoundError",
    "EntryNotReversibleError",
    "EntryReversedError",
    "EntryStatus",
    "Finalization",
    "InvalidBookingError",
    "Ledger",
    "LedgerAccount",
    "LedgerBase",
    "LedgerEntry",
    "LedgerError",
    "LedgerEventSink",
    "LedgerFact",
    "LedgerFinalization",
    "LedgerInvariantError",
    "LedgerLine",
    "LedgerReader",
    "LedgerSequence",
    "PayerTotal",
    "SettlementBooked",
    "SettlementBooking",
    "SettlementFinalized",
    "SettlementRecord",
    "SettlementReversed",
    "StatementLine",
    "allocate_sequence",
    "balances_json",
    "check_invariants",
    "format_time",
    "ledger_cli",
    "spreadsheet_safe",
    "statement_csv",
    "statement_json",
]

_EXPORTS = {
    "_errors": (
        "BookingConflictError",
        "EntryNotFoundError",
        "EntryNotReversibleError",
        "EntryReversedError",
        "InvalidBookingError",
        "LedgerError",
        "LedgerInvariantError",
    ),
    "_invariants": ("check_invariants",),
    "_ledger": ("Along", "Ap2Lookup", "Ledger"),
    "_models": (
        "LedgerAccount",
        "LedgerBase",
        "LedgerEntry",
        "LedgerFinalization",
        "LedgerLine",
        "LedgerSequence",
    ),
    "_queries": ("LedgerReader",),
    "_records": (
        "Ap2References",
        "Balance",
        "BookedEntry",
        "DailyRevenue",
        "EntryKind",
        "EntryStatus",
        "Finalization",
        "LedgerEventSink",
        "LedgerFact",
        "PayerTotal",
        "SettlementBooked",
        "SettlementBooking",
        "SettlementFinalized",
        "SettlementRecord",
        "SettlementReversed",
        "StatementLine",
    ),
    "_sequence": ("allocate_sequence",),
    "_statement": (
        "STATEMENT_COLUMNS",
        "balances_json",
        "format_time",
        "spreadsheet_safe",
        "statement_csv",
        "statement_json",
    ),
    "cli": ("ledger_cli",),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
