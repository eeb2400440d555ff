"""The merchant's side of the embedded flow (specification §20): AP2 mandates beside x402 payments.

`_sdk` is the one module that imports the AP2 SDK (`ap2`, installed by scripts/setup from its snapshot):
`verify_mandate` checks a mandate chain's signatures, bindings and times against the issuer keys a tenant
trusts (`IssuerKeys`), `check_checkout_mandate` and `check_payment_mandate` its constraints, and every
refusal is a `MandateRefused` carrying the `ap2Error` code of §20.6. The SDK is imported on first use.

What the merchant signs needs no SDK: `_keys` loads a tenant's checkout keys (`load_checkout_keys`: PEM
files of EC P-256 keys, the first signs, all are published by `CheckoutKeys.public_jwks`, their private
parts redacted from logs), `_checkout` makes a round's checkout JWT from the terms it offers
(`sign_checkout`, or `CheckoutNotOffered` when the price rule refuses them), and `_receipts` the AP2
receipts that end a round (`success_receipts`, `error_receipts`).

A payment's mandates are verified by `verify_mandates` (§20.5 steps 1 to 5, our bindings of the checkout,
payee, amount and payment among them), which returns the `AcceptedMandates` or refuses; `MandateUsageStore`
keeps what was accepted under each open payment mandate (reserve, then confirm or release with the change of
state that ends the round, `decide_in`), which its budget and recurrence are checked against. A round's
stored checkout that cannot be read is a `StoredCheckoutError`, the merchant's fault.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that importing the package does not
# import the AP2 SDK.
if TYPE_CHECKING:
    from ._checkout import (
        CheckoutItem,
        CheckoutNotOffered,
        NotOfferedReason,
        ParAsset,
        SignedCheckout,
        checkout_claims,
        merchant_issuer,
        sign_checkout,
    )
    from ._keys import (
        CHECKOUT_JWT_TYPE,
        CheckoutKeyError,
        CheckoutKeys,
        CheckoutTokenError,
        load_checkout_keys,
    )
    from ._receipts import ReceiptSubject, error_receipts, mandate_reference, success_receipts
    from ._sdk import (
        IssuerKeys,
        MandateKind,
        MandateRefused,
        MandateUsage,
        VerifiedMandate,
        ap2_sdk_available,
        check_checkout_mandate,
        check_payment_mandate,
        verify_mandate,
    )
    from ._usage import MandateUsageStore, Reservation, UseState, mandate_usage_metadata
    from ._verify import AcceptedMandates, StoredCheckoutError, UsageReader, verify_mandates

__all__ = [
    "CHECKOUT_JWT_TYPE",
    "AcceptedMandates",
    "CheckoutItem",
    "CheckoutKeyError",
    "CheckoutKeys",
    "CheckoutNotOffered",
    "CheckoutTokenError",
    "IssuerKeys",
    "MandateKind",
    "MandateRefused",
    "MandateUsage",
    "MandateUsageStore",
    "NotOfferedReason",
    "ParAsset",
    "ReceiptSubject",
    "Reservation",
    "SignedCheckout",
    "StoredCheckoutError",
    "UseState",
    "UsageReader",
    "VerifiedMandate",
    "ap2_sdk_available",
    "check_checkout_mandate",
    "check_payment_mandate",
    "checkout_claims",
    "error_receipts",
    "load_checkout_keys",
    "mandate_reference",
    "mandate_usage_metadata",
    "merchant_issuer",
    "sign_checkout",
    "success_receipts",
    "verify_mandate",
    "verify_mandates",
]

_EXPORTS = {
    "_checkout": (
        "CheckoutItem",
        "CheckoutNotOffered",
        "NotOfferedReason",
        "ParAsset",
        "SignedCheckout",
        "checkout_claims",
        "merchant_issuer",
        "sign_checkout",
    ),
    "_keys": (
        "CHECKOUT_JWT_TYPE",
        "CheckoutKeyError",
        "CheckoutKeys",
        "CheckoutTokenError",
        "load_checkout_keys",
    ),
    "_receipts": ("ReceiptSubject", "error_receipts", "mandate_reference", "success_receipts"),
    "_sdk": (
        "IssuerKeys",
        "MandateKind",
        "MandateRefused",
        "MandateUsage",
        "VerifiedMandate",
        "ap2_sdk_available",
        "check_checkout_mandate",
        "check_payment_mandate",
        "verify_mandate",
    ),
    "_usage": ("MandateUsageStore", "Reservation", "UseState", "mandate_usage_metadata"),
    "_verify": ("AcceptedMandates", "StoredCheckoutError", "UsageReader", "verify_mandates"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
