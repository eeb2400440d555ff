"""The paying side: resolve a merchant's card, pay for its x402-priced skills, and the ``x402-pay`` CLI.

* ``Payer``            -- one merchant (card, binding, tenant), one key: ``pay``, ``pay_streaming``
* ``PaymentPolicy``    -- which terms the payer signs: amount cap, networks, assets, payTo pinning
* ``resolve_card``     -- fetch, verify and read a card's x402 terms (``_card``)
* ``PaymentStage`` / ``PaidResult`` -- what a run reports (``_stages``)
* ``sign_payment``     -- the EIP-3009 authorization itself (``_signing``)
* errors with stable codes (``_errors``)
"""

from __future__ import annotations

from ._card import Binding, CardAsset, CardPayee, CardPaymentTerms, ResolvedCard, resolve_card
from ._errors import (
    AmountOverLimitError,
    CardError,
    CardNotServedError,
    InsufficientFundsError,
    MerchantError,
    MerchantUnreachableError,
    NoAcceptableTermsError,
    PayerError,
    PaymentAttemptsExhaustedError,
    PaymentFailedError,
    PaymentPendingError,
    PaymentRefusedError,
    PayToNotPinnedError,
    UntrustedCardError,
)
from ._payer import Payer
from ._policy import PaymentPolicy
from ._settings import FreshTermsHook, PayerSettings
from ._signing import VALID_AFTER_BACKDATE_S, sign_payment
from ._stages import PaidResult, PaymentStage, StageKind

__all__ = [
    "AmountOverLimitError",
    "Binding",
    "CardAsset",
    "CardError",
    "CardNotServedError",
    "CardPayee",
    "CardPaymentTerms",
    "FreshTermsHook",
    "InsufficientFundsError",
    "MerchantError",
    "MerchantUnreachableError",
    "NoAcceptableTermsError",
    "PaidResult",
    "PayToNotPinnedError",
    "Payer",
    "PayerError",
    "PayerSettings",
    "PaymentAttemptsExhaustedError",
    "PaymentFailedError",
    "PaymentPendingError",
    "PaymentPolicy",
    "PaymentRefusedError",
    "PaymentStage",
    "ResolvedCard",
    "StageKind",
    "UntrustedCardError",
    "VALID_AFTER_BACKDATE_S",
    "resolve_card",
    "sign_payment",
]
