"""What a metered (x402 `upto`) payment is settled for: the amount its work used, capped at the maximum.

The payer signs for the maximum and the payment is verified against it before the work; the usage is stored
with the offer when the work is done, and every settlement of the payment (the paid turn's, recovery's) is
asked for with the accepted terms' amount replaced by the usage's settled amount, so each asks for the same.
"""

from __future__ import annotations

from a2a_x402.extension import PaymentUsage
from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements

from ._offer_table import Offer
from ._usage import usage_from_json

__all__ = [
    "UPTO",
    "offered_maximum",
    "settled_requirements",
    "settled_text",
    "stored_usage",
]

UPTO = "upto"
"""The x402 scheme of metered terms."""


def settled_requirements(accepted: PaymentRequirements, usage: PaymentUsage | None) -> PaymentRequirements:
    """The requirements a payment taken for `accepted` is settled with: `accepted` itself, or for a metered
    payment with its `amount` the usage's settled amount (never above the maximum accepted)."""
    if usage is None:
        return accepted
    return accepted.model_copy(update={"amount": min(usage.settled, accepted.amount)})


def stored_usage(offer: Offer) -> PaymentUsage | None:
    """The usage stored with a metered offer when its work was done; None for any other offer."""
    return usage_from_json(offer.usage) if offer.usage is not None else None


def offered_maximum(offer: Offer) -> int | None:
    """A metered offer's maximum (the amount of its `upto` terms); None for a fixed-price offer."""
    for entry in PaymentRequired.from_wire(offer.required).accepts:
        if entry.scheme == UPTO:
            return entry.amount
    return None


def settled_text(transaction: str) -> str:
    """What the completed task's status says of its settlement: a metered payment settled for 0 sent no
    transaction."""
    if not transaction:
        return "Nothing was used, so nothing was charged."
    return f"Payment settled in transaction {transaction}."
