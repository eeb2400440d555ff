"""The open AP2 mandates' constraints as the payer checks them before presenting (§20.4, §20.5 steps 3
and 5): the same rules the merchant's SDK evaluates, on the payer's own view of its user's tokens
(``_ap2_tokens``), so that a payment the user did not allow is refused before anything is signed. Which
disclosures a payment needs is decided here too (only the allowed merchant, payee and instrument)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._ap2_tokens import OpenToken
from ._ap2_usage import MandateSpend
from ._errors import MandateConstraintError

__all__ = [
    "BUDGET_SCALE",
    "allowed_for_checkout",
    "allowed_for_payment",
    "check_checkout",
    "check_payment",
    "check_times",
    "checkout_total",
    "constraints",
    "paying_account",
    "with_tilde",
]

# The SDK's budget evaluator reads `payment.budget.max` in major units and multiplies it by 100; the
# payer counts the same way, so that it refuses exactly what the merchant would.
BUDGET_SCALE = 100


def constraints(opened: OpenToken, kind: str) -> list[Mapping[str, Any]]:
    """The constraints of ``kind`` of an open mandate."""
    return [c for c in opened.claims.get("constraints", ()) if isinstance(c, dict) and c.get("type") == kind]


def check_times(opened: OpenToken, now: int) -> None:
    """Refuse an open mandate that expired before ``now``."""
    expires = opened.claims.get("exp")
    if isinstance(expires, int) and now > expires:
        raise MandateConstraintError("exp", f"the open {opened.kind} mandate has expired")


def check_checkout(opened: OpenToken, merchant_id: str) -> None:
    """Refuse a checkout for a merchant the open checkout mandate does not allow."""
    for constraint in constraints(opened, "checkout.allowed_merchants"):
        if not any(_has_id(allowed, merchant_id) for allowed in constraint.get("allowed", ())):
            raise MandateConstraintError(
                "checkout.allowed_merchants", "the open checkout mandate does not allow this merchant"
            )


def check_payment(
    opened: OpenToken, amount: tuple[int, str], merchant_id: str, instrument_id: str, usage: MandateSpend
) -> None:
    """Refuse a payment of ``amount`` the open payment mandate does not allow, given what ``usage`` says
    was presented under it already; a constraint the payer cannot evaluate refuses too."""
    total, currency = amount
    for constraint in opened.claims.get("constraints", ()):
        kind = constraint.get("type") if isinstance(constraint, dict) else None
        if kind == "payment.amount_range":
            low, high = constraint.get("min"), constraint.get("max")
            if (
                constraint.get("currency") != currency
                or (isinstance(low, int) and total < low)
                or (isinstance(high, int) and total > high)
            ):
                raise MandateConstraintError(
                    kind, f"{total} {currency} minor units are outside the allowed amount range"
                )
        elif kind == "payment.allowed_payees":
            if not any(_has_id(allowed, merchant_id) for allowed in constraint.get("allowed", ())):
                raise MandateConstraintError(kind, "the open payment mandate does not allow this payee")
        elif kind == "payment.allowed_payment_instruments":
            if not any(_has_id(allowed, instrument_id) for allowed in constraint.get("allowed", ())):
                raise MandateConstraintError(kind, "the open payment mandate does not allow this wallet")
        elif kind == "payment.budget":
            limit = constraint.get("max")
            if constraint.get("currency") != currency or not isinstance(limit, (int, float)):
                raise MandateConstraintError(kind, f"the budget is not in {currency}")
            budget = int(limit * BUDGET_SCALE)
            if usage.total + total > budget:
                raise MandateConstraintError(
                    kind,
                    f"{total} more would exceed the budget of {budget} ({usage.total} spent)",
                )
        elif kind == "payment.agent_recurrence":
            most = constraint.get("max_occurrences")
            if isinstance(most, int) and usage.uses >= most:
                raise MandateConstraintError(
                    kind, f"the open payment mandate was used {usage.uses} of {most} times"
                )
        elif kind != "payment.reference":  # checked against the presented checkout mandate
            raise MandateConstraintError(str(kind)[:64], "the payer cannot evaluate this constraint")


def allowed_for_checkout(kind: str, value: Any, merchant_id: str) -> bool:
    """Whether a disclosed element of the open checkout mandate is needed for this merchant."""
    return kind != "checkout.allowed_merchants" or _has_id(value, merchant_id)


def allowed_for_payment(kind: str, value: Any, merchant_id: str, instrument_id: str) -> bool:
    """Whether a disclosed element of the open payment mandate is needed for this payee and wallet."""
    if kind == "payment.allowed_payees":
        return _has_id(value, merchant_id)
    if kind == "payment.allowed_payment_instruments":
        return _has_id(value, instrument_id)
    return True


def _has_id(value: Any, wanted: str) -> bool:
    return isinstance(value, dict) and value.get("id") == wanted


def checkout_total(checkout: Mapping[str, Any]) -> tuple[int, str]:
    """The checkout's total (minor units) and currency."""
    totals = [t for t in checkout.get("totals", ()) if isinstance(t, dict) and t.get("type") == "total"]
    currency = checkout.get("currency")
    if len(totals) != 1 or not isinstance(totals[0].get("amount"), int) or not isinstance(currency, str):
        raise MandateConstraintError("checkout", "the checkout has no single total in a currency")
    return totals[0]["amount"], currency


def paying_account(payment_payload: Mapping[str, Any]) -> str:
    """The paying account as CAIP-10: the network of ``accepted`` and the authorization's ``from``."""
    accepted = payment_payload.get("accepted")
    inner = payment_payload.get("payload")
    network = accepted.get("network") if isinstance(accepted, Mapping) else None
    signed = None
    if isinstance(inner, Mapping):
        signed = inner.get("authorization") or inner.get("permit2Authorization")
    payer = signed.get("from") if isinstance(signed, Mapping) else None
    if not isinstance(network, str) or not isinstance(payer, str):
        raise MandateConstraintError("payment", "the payment names no network and payer")
    return f"{network}:{payer}"


def with_tilde(token: str) -> str:
    """An SD-JWT with its closing ``~``."""
    return token if token.endswith("~") else token + "~"
