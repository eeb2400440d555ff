"""The catalogue's checks of the payment kinds beside ``exact`` by EIP-3009: ``exact`` by Permit2 (§7.8) and
metered ``upto`` payments (§6.4, §7.7). Each applies where the terms offer its kind, and is skipped saying so
elsewhere; ``_catalogue.CHECKS`` lists them after the others."""

from __future__ import annotations

from ._check_spec import CheckSpec, Level, Scope
from ._check_spec import make_check as _c

__all__ = ["PAYMENT_KIND_CHECKS"]

_M, _V10 = Level.MUST, Scope.A2A_1_0

PAYMENT_KIND_CHECKS: tuple[CheckSpec, ...] = (
    _c(
        "permit2.completes",
        _M,
        _V10,
        "7.8",
        "Where the terms offer exact by Permit2, a Permit2 witness transfer completes the task: the "
        "artifact, and payment-completed with a successful receipt.",
    ),
    _c(
        "permit2.settled-on-chain",
        _M,
        _V10,
        "7.8",
        "The receipt's transaction moved exactly the price from the payer to the offered payTo and spent the "
        "payment's Permit2 nonce.",
    ),
    _c(
        "metered.completes",
        _M,
        _V10,
        "7.7",
        "Where the terms offer upto, a Permit2 witness transfer for the maximum completes the task: the "
        "artifact, then payment-completed with a successful receipt and usage.",
    ),
    _c(
        "metered.within-maximum",
        _M,
        _V10,
        "7.7",
        "The settled amount (the receipt's amount, usage.settled) is never above the authorized maximum.",
    ),
    _c(
        "metered.usage-consistent",
        _M,
        _V10,
        "6.4",
        "usage has only the members of §6.4, each item's amount is quantity × unitPrice, maximum is the "
        "offered one, and settled is min(sum, maximum) and the receipt's amount.",
    ),
    _c(
        "metered.settled-on-chain",
        _M,
        _V10,
        "7.7",
        "The settlement transaction moved exactly the settled amount from the payer to payTo; a settlement "
        "of 0 names no transaction and leaves the Permit2 nonce unspent.",
    ),
    _c(
        "metered.failed-work",
        _M,
        _V10,
        "7.7",
        "Failed metered work settles nothing: payment-failed with SETTLEMENT_FAILED, no successful receipt, "
        "no usage, the Permit2 nonce unspent (run with --failing-request).",
    ),
)
