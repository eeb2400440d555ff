"""The reconciler's differences, stored with a lifecycle: open until the chain or an operator resolves them.

`DifferenceStore` keeps them (table `reconcile_differences`); `book_difference` books a payment no offer
explains to a tenant; the kinds are named in `merchant.differences._kinds`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._booking import DifferenceRefusedError, acknowledge_difference, book_difference
    from ._kinds import (
        BOOKABLE_KINDS,
        CHAIN_KINDS,
        CHAIN_RESTARTED,
        CHAIN_WIDE_KINDS,
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
    "CHAIN_WIDE_KINDS",
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

_EXPORTS = {
    "_booking": ("DifferenceRefusedError", "acknowledge_difference", "book_difference"),
    "_kinds": (
        "BOOKABLE_KINDS",
        "CHAIN_KINDS",
        "CHAIN_RESTARTED",
        "CHAIN_WIDE_KINDS",
        "KNOWN_KINDS",
        "LEDGER_KINDS",
        "PAYMENT_KINDS",
        "REORGED_OUT",
    ),
    "_store": (
        "MAX_NOTE_CHARS",
        "DifferenceNotOpenError",
        "DifferenceState",
        "DifferenceStore",
        "Sighting",
        "StoredDifference",
    ),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
