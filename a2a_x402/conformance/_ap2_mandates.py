"""The mandates the kit presents (§20.4), right or wrong in exactly one way each check names.

The kit plays the user's Trusted Surface with the operator's issuer key (``--ap2-issuer-key``, an issuer the
merchant trusts for the tenant) and the agent with a fresh key per round: it issues an open checkout mandate
(this merchant only) and an open payment mandate (this payee, an amount range up to the price, the open
checkout mandate as ``payment.reference``, a budget), then closes both over the round's checkout and the
x402 payment it sends. A ``Twist`` changes one thing: the payment the payment mandate names, the checkout
the mandates close, the closing hops' ``aud`` or ``nonce``, the issuer, the budget, or an unknown constraint.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a_x402.extension import (
    Ap2Declaration,
    Ap2Mandates,
    ap2_digest,
    minor_unit_exponent,
    payload_hash,
)

from . import _ap2_sdk as sdk

__all__ = ["STRAIGHT", "UNKNOWN_CONSTRAINT", "Twist", "closed_reference", "make_mandates"]

JSON = Any
UNKNOWN_CONSTRAINT = "payment.x-conformance-kit-unknown"
"""A constraint type no AP2 version defines: a merchant cannot evaluate it."""
_LIFETIME_S = 3600
_GENEROUS = 100
"""A good open mandate's budget: this many times the price."""


@dataclass(frozen=True)
class Twist:
    """What the mandates get wrong (nothing, by default)."""

    payment: JSON = None
    """Another x402 payment for the payment mandate's ``payload_hash`` to name."""
    checkout_jwt: str = ""
    """Another round's checkout JWT for the mandates to close."""
    aud: str = ""
    nonce: str = ""
    untrusted_issuer: bool = False
    """Issue the open mandates with a fresh key the merchant cannot know."""
    budget_below_price: bool = False
    unknown_constraint: bool = False


STRAIGHT = Twist()
"""Mandates that get nothing wrong."""


def closed_reference(mandate: str) -> str:
    """The ``reference`` of a receipt answering ``mandate``: the hash of the issuer-signed JWT of its last
    SD-JWT (§20.6)."""
    return ap2_digest(mandate.rsplit("~~", 1)[-1].split("~", 1)[0])


def _major(minor: int, currency: str) -> float:
    scale: int = 10 ** minor_unit_exponent(currency)
    return minor / scale


def make_mandates(
    issuer_jwk: Mapping[str, str],
    entry: Ap2Declaration,
    checkout_jwt: str,
    checkout: JSON,
    payment: JSON,
    twist: Twist = STRAIGHT,
) -> Ap2Mandates:
    """The closed mandates of the round whose checkout is ``checkout_jwt`` (claims ``checkout``) for the
    x402 ``payment`` (the extension object's ``payload``), twisted by ``twist``.

    Raises:
        Ap2SdkError: the SDK is missing or refused a key or mandate.
        ValueError: the checkout has no single total, or the payment no network and payer.
    """
    now = int(time.time())
    issuer = (
        sdk.generate_key("untrusted-" + os.urandom(4).hex())
        if twist.untrusted_issuer
        else sdk.import_key(issuer_jwk)
    )
    agent = sdk.generate_key("agent")
    merchant = entry.merchant.to_wire()
    totals = [t for t in checkout.get("totals", ()) if isinstance(t, dict) and t.get("type") == "total"]
    total, currency = (totals[0].get("amount") if len(totals) == 1 else None), checkout.get("currency")
    if not isinstance(total, int) or not isinstance(currency, str):
        raise ValueError("the checkout has no single total in a currency")
    times = {"cnf": {"jwk": sdk.public_jwk(agent)}, "iat": now - 60, "exp": now + _LIFETIME_S}
    open_checkout = sdk.issue(
        issuer,
        {
            "vct": "mandate.checkout.open.1",
            "constraints": [{"type": "checkout.allowed_merchants", "allowed": [merchant]}],
            **times,
        },
    )
    budget = total // 2 if twist.budget_below_price else total * _GENEROUS
    constraints: list[JSON] = [
        {"type": "payment.amount_range", "currency": currency, "min": 0, "max": total},
        {"type": "payment.allowed_payees", "allowed": [merchant]},
        {"type": "payment.reference", "conditional_transaction_id": ap2_digest(open_checkout)},
        {"type": "payment.budget", "max": _major(budget, currency), "currency": currency},
    ]
    if twist.unknown_constraint:
        constraints.append({"type": UNKNOWN_CONSTRAINT, "value": 1})
    open_payment = sdk.issue(issuer, {"vct": "mandate.payment.open.1", "constraints": constraints, **times})
    closes = twist.checkout_jwt or checkout_jwt
    checkout_hash = ap2_digest(closes)
    paid = twist.payment if twist.payment is not None else payment
    closed_checkout = {
        "vct": "mandate.checkout.1",
        "checkout_jwt": closes,
        "checkout_hash": checkout_hash,
        "iat": now,
    }
    closed_payment = {
        "vct": "mandate.payment.1",
        "transaction_id": checkout_hash,
        "payee": merchant,
        "payment_amount": {"amount": total, "currency": currency},
        "payment_instrument": {
            "id": _instrument(payment),
            "type": "x402",
            "payload_hash": payload_hash(paid),
        },
        "iat": now,
    }
    aud, nonce = twist.aud or entry.merchant.id, twist.nonce or str(checkout.get("id"))
    return Ap2Mandates(
        checkout_mandate=sdk.present(agent, open_checkout, closed_checkout, aud=aud, nonce=nonce),
        payment_mandate=sdk.present(agent, open_payment, closed_payment, aud=aud, nonce=nonce),
    )


def _instrument(payment: JSON) -> str:
    """The paying account as CAIP-10: the network of ``accepted`` and the authorization's ``from``."""
    accepted, inner = payment.get("accepted"), payment.get("payload")
    network = accepted.get("network") if isinstance(accepted, dict) else None
    signed = (
        (inner.get("authorization") or inner.get("permit2Authorization")) if isinstance(inner, dict) else None
    )
    payer = signed.get("from") if isinstance(signed, dict) else None
    if not isinstance(network, str) or not isinstance(payer, str):
        raise ValueError("the payment names no network and payer")
    return f"{network}:{payer}"
