"""The kinds of difference the reconciler stores, and which of them the chain can resolve on its own."""

from __future__ import annotations

__all__ = [
    "AUTHORIZATION_REUSED",
    "BOOKABLE_KINDS",
    "BOOKED_DIFFERENTLY",
    "BOOKING_REVERSED",
    "CHAIN_RESTARTED",
    "CHAIN_UNAVAILABLE",
    "CHAIN_KINDS",
    "CHAIN_WIDE_KINDS",
    "KNOWN_KINDS",
    "LEDGER_KINDS",
    "NOT_BOOKED_YET",
    "OTHER",
    "PAYMENT_KINDS",
    "RECOVERY_UNPROVEN",
    "REORGED_OUT",
    "TERMS_DIFFER",
    "TOLD_FAILED",
    "UNBOOKED_PAYMENT",
]

UNBOOKED_PAYMENT = "unbooked_payment"
"""A payment to a payTo that is not in the ledger and that no offer was paid with."""
TOLD_FAILED = "payment_told_failed"
"""A payment on chain whose task was told its payment failed or was declined."""
TERMS_DIFFER = "payment_terms_differ"
"""A payment on chain that does not match the terms its task accepted."""
NOT_BOOKED_YET = "payment_not_booked_yet"
"""A payment of a paid task that could not be booked yet (retried)."""
BOOKING_REVERSED = "booking_reversed"
"""A payment on chain whose booking was reversed."""
BOOKED_DIFFERENTLY = "booked_differently"
"""A payment on chain booked with another amount or payee."""
REORGED_OUT = "reorged_out"
"""A finalized booking whose transaction is no longer on the chain."""
AUTHORIZATION_REUSED = "authorization_reused"
"""A booking whose transaction left the chain while another one used its authorization."""
CHAIN_UNAVAILABLE = "chain_unavailable"
"""The chain could not be read (the operator's problem)."""
RECOVERY_UNPROVEN = "recovery_unproven"
"""A paid task's settlement the chain does not show paying its offer."""
CHAIN_RESTARTED = "chain_restarted"
"""The chain's genesis block changed: a dev chain was restarted and its history is gone."""
OTHER = "other"
"""Any difference reported without a kind of its own."""

PAYMENT_KINDS = frozenset(
    {UNBOOKED_PAYMENT, TOLD_FAILED, TERMS_DIFFER, NOT_BOOKED_YET, BOOKING_REVERSED, BOOKED_DIFFERENTLY}
)
"""Payments seen on chain (their facts: payer, nonce, pay_to, amount, tx_hash, block_number)."""
LEDGER_KINDS = frozenset({UNBOOKED_PAYMENT, TOLD_FAILED, TERMS_DIFFER, NOT_BOOKED_YET})
"""Payments the ledger lacked: resolved once the ledger has their authorization."""
CHAIN_KINDS = PAYMENT_KINDS | {REORGED_OUT, AUTHORIZATION_REUSED, CHAIN_UNAVAILABLE}
"""Differences about the chain's history: a chain restart resolves them."""
CHAIN_WIDE_KINDS = frozenset({CHAIN_UNAVAILABLE, CHAIN_RESTARTED})
"""Differences about the chain itself, stored with no tenant or payTo: every tenant is shown them (they
bear on every tenant's payments), the operator alone closes them."""
BOOKABLE_KINDS = frozenset({UNBOOKED_PAYMENT})
"""Differences an operator may book to a tenant: a transfer to its payTo not in the ledger."""
KNOWN_KINDS = tuple(sorted(CHAIN_KINDS | {RECOVERY_UNPROVEN, CHAIN_RESTARTED}))
"""The kinds the reconciler names (the open-differences gauge shows each, at 0 when none is open)."""
