"""The paying side: resolve a merchant's card, pay for its x402-priced skills, and the ``x402-pay`` CLI.

* ``Payer``            -- one merchant (card, binding, tenant), one key: ``pay``, ``pay_streaming``;
  ``async with Payer.connect(card_url, key, policy=PaymentPolicy(max_amount_atomic=...)) as payer:``
* ``PaymentPolicy``    -- which terms the payer signs: amount cap, networks, assets, payTo pinning, and
  ``upto`` (metered) terms within a cap per task and per UTC day
* ``resolve_card``     -- fetch, verify and read a card's x402 terms (``_card``)
* ``PaymentStage`` / ``PaidResult`` -- what a run reports (``_stages``)
* ``sign_payment``     -- the EIP-3009 authorization itself (``_signing``)
* ``sign_permit2_payment`` -- a Permit2 witness transfer: ``exact`` by Permit2, or ``upto`` (``_permit2``)
* ``approve_permit2``  -- the one-time approval of Permit2 a token without EIP-2612 needs (``_approve``)
* ``OpenMandates`` / ``present_mandates`` -- the user's open AP2 mandates, closed over one payment (§20.4;
  ``_ap2_sdk``, the payer's only importer of the AP2 SDK); ``Payer(..., mandates=OpenMandates(...))`` pays
  a tenant the card declares in ``params.ap2`` with them (``_ap2_round``, ``_ap2_offer``)
* ``MandateUsageMemory`` / ``MandateUsageFile`` -- where the payer counts its uses of an open payment
  mandate against its budget (``_ap2_usage``)
* errors with stable codes (``_errors``)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._ap2_sdk import OpenMandates, present_mandates
    from ._ap2_usage import MandateUsageFile, MandateUsageMemory
    from ._approve import Approval, approve_permit2
    from ._card import Binding, CardAsset, CardPayee, CardPaymentTerms, ResolvedCard, resolve_card
    from ._connecting import Connecting
    from ._errors import (
        AmountOverLimitError,
        CardError,
        CardNotServedError,
        ChainError,
        CheckoutInvalidError,
        InsufficientFundsError,
        MandateConstraintError,
        MandatesNotSupportedError,
        MandatesRefusedError,
        MandatesRequiredError,
        MerchantError,
        MerchantUnreachableError,
        NoAcceptableTermsError,
        PayerError,
        PaymentAttemptsExhaustedError,
        PaymentFailedError,
        PaymentPendingError,
        PaymentRefusedError,
        PayToNotPinnedError,
        Permit2NotApprovedError,
        UnresolvedConstraintError,
        UntrustedCardError,
        UptoDayCapUnavailableError,
    )
    from ._payer import Payer
    from ._permit2 import Permit2Payment, sign_permit2_payment
    from ._policy import PaymentPolicy
    from ._settings import FreshTermsHook, PayerSettings
    from ._signing import VALID_AFTER_BACKDATE_S, sign_payment
    from ._stages import PaidResult, PaymentStage, StageKind

__all__ = [
    "AmountOverLimitError",
    "Approval",
    "Binding",
    "CardAsset",
    "CardError",
    "CardNotServedError",
    "CardPayee",
    "CardPaymentTerms",
    "ChainError",
    "CheckoutInvalidError",
    "Connecting",
    "FreshTermsHook",
    "InsufficientFundsError",
    "MandateConstraintError",
    "MandateUsageFile",
    "MandateUsageMemory",
    "MandatesNotSupportedError",
    "MandatesRefusedError",
    "MandatesRequiredError",
    "MerchantError",
    "MerchantUnreachableError",
    "NoAcceptableTermsError",
    "OpenMandates",
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
    "Permit2NotApprovedError",
    "Permit2Payment",
    "ResolvedCard",
    "StageKind",
    "UnresolvedConstraintError",
    "UntrustedCardError",
    "UptoDayCapUnavailableError",
    "VALID_AFTER_BACKDATE_S",
    "approve_permit2",
    "present_mandates",
    "resolve_card",
    "sign_payment",
    "sign_permit2_payment",
]

_EXPORTS = {
    "_ap2_sdk": ("OpenMandates", "present_mandates"),
    "_ap2_usage": ("MandateUsageFile", "MandateUsageMemory"),
    "_approve": ("Approval", "approve_permit2"),
    "_card": ("Binding", "CardAsset", "CardPayee", "CardPaymentTerms", "ResolvedCard", "resolve_card"),
    "_connecting": ("Connecting",),
    "_errors": (
        "AmountOverLimitError",
        "CardError",
        "CardNotServedError",
        "ChainError",
        "CheckoutInvalidError",
        "InsufficientFundsError",
        "MandateConstraintError",
        "MandatesNotSupportedError",
        "MandatesRefusedError",
        "MandatesRequiredError",
        "MerchantError",
        "MerchantUnreachableError",
        "NoAcceptableTermsError",
        "PayerError",
        "PaymentAttemptsExhaustedError",
        "PaymentFailedError",
        "PaymentPendingError",
        "PaymentRefusedError",
        "Permit2NotApprovedError",
        "PayToNotPinnedError",
        "UnresolvedConstraintError",
        "UntrustedCardError",
        "UptoDayCapUnavailableError",
    ),
    "_payer": ("Payer",),
    "_permit2": ("Permit2Payment", "sign_permit2_payment"),
    "_policy": ("PaymentPolicy",),
    "_settings": ("FreshTermsHook", "PayerSettings"),
    "_signing": ("VALID_AFTER_BACKDATE_S", "sign_payment"),
    "_stages": ("PaidResult", "PaymentStage", "StageKind"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
