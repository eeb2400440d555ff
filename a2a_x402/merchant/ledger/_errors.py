"""Ledger exceptions. Each has a stable `code`; surfaces map them to HTTP statuses in one table.

LedgerError
├── InvalidBookingError       a booking or request argument is malformed (also a ValueError)
├── BookingConflictError      the authorization is already booked with different details
├── EntryNotFoundError        no journal entry with this id (also a LookupError)
├── EntryNotReversibleError   only settlement entries can be reversed
├── EntryReversedError        a reversed settlement cannot be finalized
└── LedgerInvariantError      the books do not balance (a bug or a manual edit)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BookingConflictError",
    "EntryNotFoundError",
    "EntryNotReversibleError",
    "EntryReversedError",
    "InvalidBookingError",
    "LedgerError",
    "LedgerInvariantError",
]


class LedgerError(Exception):
    """Root of every exception the ledger raises on purpose."""

    code = "ledger_error"


class InvalidBookingError(LedgerError, ValueError):
    """A booking field or a request argument is malformed; the message names the field."""

    code = "invalid_booking"


class BookingConflictError(LedgerError):
    """The authorization is already booked, for another tenant, task, payee, amount or transaction.

    The same EIP-3009 authorization can move money only once on chain, so a second booking that differs from
    the first is a caller bug or a replay, never a second payment.
    """

    code = "booking_conflict"

    def __init__(self, entry_id: str, fields: Sequence[str]) -> None:
        self.entry_id = entry_id
        self.fields = tuple(fields)
        super().__init__(
            f"authorization already booked as {entry_id} with different {', '.join(self.fields)}"
        )


class EntryNotFoundError(LedgerError, LookupError):
    """No journal entry has this id."""

    code = "entry_not_found"

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"no journal entry {entry_id!r}")


class EntryNotReversibleError(LedgerError):
    """Only a settlement entry can be reversed; reversing a reversal is refused."""

    code = "entry_not_reversible"

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"journal entry {entry_id} is not a settlement and cannot be reversed")


class EntryReversedError(LedgerError):
    """The settlement was reversed (its transaction left the chain), so it can no longer become final."""

    code = "entry_reversed"

    def __init__(self, entry_id: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"settlement {entry_id} was reversed and cannot be finalized")


class LedgerInvariantError(LedgerError):
    """The books are inconsistent; `problems` lists every violation found."""

    code = "ledger_invariant_violated"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        listed = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"{len(self.problems)} ledger invariant violation(s):\n{listed}")
