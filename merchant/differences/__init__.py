"""The reconciler's differences, stored with a lifecycle: open until the chain or an operator resolves them.

`DifferenceStore` keeps them (table `reconcile_differences`); `book_difference` books a payment no offer
explains to a tenant; the kinds are named in `merchant.differences._kinds`.
"""

from __future__ import annotations

from ._booking import DifferenceRefusedError, acknowledge_difference, book_difference
from ._kinds import (
    BOOKABLE_KINDS,
    CHAIN_KINDS,
    CHAIN_RESTARTED,
    KNOWN_KINDS,
    LEDGER_KINDS,
    PAYMENT_KINDS,
    REORGED_OUT,
)
from ._store import (
    MAX_NOTE_CHARS,
    DifferenceNotOpenError,
    DifferenceState,
    DifferenceStore,
    Sighting,
    StoredDifference,
)

__all__ = [
    "BOOKABLE_KINDS",
    "CHAIN_KINDS",
    "CHAIN_RESTARTED",
    "KNOWN_KINDS",
    "LEDGER_KINDS",
    "MAX_NOTE_CHARS",
    "PAYMENT_KINDS",
    "REORGED_OUT",
    "DifferenceRefusedError",
    "DifferenceNotOpenError",
    "DifferenceState",
    "DifferenceStore",
    "Sighting",
    "StoredDifference",
    "acknowledge_difference",
    "book_difference",
]
