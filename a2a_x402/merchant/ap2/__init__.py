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

The v0.2 form on A2A 0.3 (§20.7), without the SDK: `_v01` builds a round's AP2 v0.1 `CartMandate`
(`build_cart`) and checks the `PaymentMandate` that pays it (`verify_payment_mandate`), whose
`user_authorization` `_user_authorization` verifies (an SD-JWT with a key-binding JWT over the two hashes).

A payment's mandates are verified by `verify_mandates` (§20.5 steps 1 to 5, our bindings of the checkout,
payee, amount and payment among them), which returns the `AcceptedMandates` or refuses; `MandateUsageStore`
keeps what was accepted under each open payment mandate (reserve, then confirm or release with the change of
state that ends the round, `decide_in`), which its budget and recurrence are checked against. A round's
stored checkout that cannot be read is a `StoredCheckoutError`, the merchant's fault. The issuer keys a
tenant trusts are its `TrustedIssuers` (`_issuers`): its JWK Set files and `https` sources, fetched with a
timeout and a size limit and cached by `kid`; a payment's mandates are verified against
`keys_for(issuer_kids(mandates))`, a v0.2 `user_authorization` against
`keys_for(token_kids(user_authorization))`. `Ap2EvidenceStore` keeps a round's checkout, mandates and
receipts for disputes, and purges them after their retention.
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
    from ._evidence import Ap2Evidence, Ap2EvidenceStore, ap2_evidence_metadata
    from ._issuers import IssuerSourceError, TrustedIssuers, check_issuer_url, issuer_kids, token_kids
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
    from ._usage import MandateUsageStore, Reservation, UseState, mandate_usage_metadata, use_of_payment
    from ._user_authorization import KB_JWT_TYPE, verify_user_authorization
    from ._v01 import (
        build_cart,
        cart_digest,
        verify_payment_mandate,
    )
    from ._verify import AcceptedMandates, StoredCheckoutError, UsageReader, verify_mandates

__all__ = [
    "AcceptedMandates",
    "Ap2Evidence",
    "Ap2EvidenceStore",
    "CHECKOUT_JWT_TYPE",
    "CheckoutItem",
    "CheckoutKeyError",
    "CheckoutKeys",
    "CheckoutNotOffered",
    "CheckoutTokenError",
    "IssuerKeys",
    "IssuerSourceError",
    "KB_JWT_TYPE",
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
    "TrustedIssuers",
    "UsageReader",
    "UseState",
    "VerifiedMandate",
    "ap2_evidence_metadata",
    "ap2_sdk_available",
    "build_cart",
    "cart_digest",
    "check_checkout_mandate",
    "check_issuer_url",
    "check_payment_mandate",
    "checkout_claims",
    "error_receipts",
    "issuer_kids",
    "load_checkout_keys",
    "mandate_reference",
    "mandate_usage_metadata",
    "merchant_issuer",
    "sign_checkout",
    "success_receipts",
    "token_kids",
    "use_of_payment",
    "verify_mandate",
    "verify_mandates",
    "verify_payment_mandate",
    "verify_user_authorization",
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
    "_evidence": ("Ap2Evidence", "Ap2EvidenceStore", "ap2_evidence_metadata"),
    "_issuers": ("IssuerSourceError", "TrustedIssuers", "check_issuer_url", "issuer_kids", "token_kids"),
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
    "_usage": ("MandateUsageStore", "Reservation", "UseState", "mandate_usage_metadata", "use_of_payment"),
    "_user_authorization": ("KB_JWT_TYPE", "verify_user_authorization"),
    "_v01": (
        "build_cart",
        "cart_digest",
        "verify_payment_mandate",
    ),
    "_verify": ("AcceptedMandates", "StoredCheckoutError", "UsageReader", "verify_mandates"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
