"""The x402 payment extension as a wrapper around any a2a-sdk `AgentExecutor`.

`PaymentExecutor` charges for the wrapped executor's skills per tenant; `PaymentRequestHandler` refuses bad
payment requests before they reach a task; `OfferStore` keeps the terms offered per task durably; a metered
skill's work reports what it used through `usage_meter`; `Checkouts` signs the AP2 checkout of the terms
offered to a tenant in the embedded flow (specification §20.3), `CartMandates` its AP2 v0.1 cart on A2A 0.3
(§20.7); `KeptMandates` checks a payment's AP2 mandates, keeps them as evidence and tells each decision,
and `round_ap2` names them in the books.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._ap2_books import round_ap2
    from ._ap2_kept import MANDATE_CODES, KeptMandates, MandatesListener
    from ._checkouts import Checkouts, checkout_artifact
    from ._executor import PaymentExecutor, SkillResolver
    from ._handler import MAX_MESSAGE_BYTES, PaymentRequestHandler
    from ._layer import PaymentLayerMissingError
    from ._mandates import PaymentMandates
    from ._mandates_v02 import CartMandates
    from ._offer_queries import OfferReader, Purchase, UnpaidAttempt
    from ._offer_table import Offer, OfferState
    from ._offers import OfferStore
    from ._outcomes import OutcomeListener, PaymentOutcome
    from ._presented import Presentations
    from ._pricing import Asset, Pricing
    from ._protocol import NEGOTIATED_VERSION_KEY, protocol_version
    from ._recovery import PaymentRecovery, exception_line
    from ._signed import SignedPayment, nonce_used, payment_from_wire, valid_before
    from ._sponsoring import GasSponsoring
    from ._transfer_method import TransferMethod, probe_transfer_method
    from ._unpaid import CLIENT_ADDRESS_KEY, PurgeReport, UnpaidLimitError, UnpaidWork, caller_of
    from ._unpaid_limits import InvalidLimitsError, UnpaidRules
    from ._upto import SupportedSource, upto_address
    from ._usage import UsageError, UsageMeter, usage_meter

__all__ = [
    "Asset",
    "CLIENT_ADDRESS_KEY",
    "CartMandates",
    "Checkouts",
    "GasSponsoring",
    "InvalidLimitsError",
    "KeptMandates",
    "MANDATE_CODES",
    "MAX_MESSAGE_BYTES",
    "MandatesListener",
    "NEGOTIATED_VERSION_KEY",
    "Offer",
    "OfferReader",
    "OfferState",
    "OfferStore",
    "OutcomeListener",
    "PaymentExecutor",
    "PaymentLayerMissingError",
    "PaymentMandates",
    "PaymentOutcome",
    "PaymentRecovery",
    "PaymentRequestHandler",
    "Presentations",
    "Pricing",
    "Purchase",
    "PurgeReport",
    "SignedPayment",
    "SkillResolver",
    "SupportedSource",
    "TransferMethod",
    "UnpaidAttempt",
    "UnpaidLimitError",
    "UnpaidRules",
    "UnpaidWork",
    "UsageError",
    "UsageMeter",
    "caller_of",
    "checkout_artifact",
    "exception_line",
    "nonce_used",
    "payment_from_wire",
    "probe_transfer_method",
    "protocol_version",
    "round_ap2",
    "upto_address",
    "usage_meter",
    "valid_before",
]

_EXPORTS = {
    "_ap2_books": ("round_ap2",),
    "_ap2_kept": ("MANDATE_CODES", "KeptMandates", "MandatesListener"),
    "_checkouts": ("Checkouts", "checkout_artifact"),
    "_executor": ("PaymentExecutor", "SkillResolver"),
    "_handler": ("MAX_MESSAGE_BYTES", "PaymentRequestHandler"),
    "_layer": ("PaymentLayerMissingError",),
    "_mandates": ("PaymentMandates",),
    "_mandates_v02": ("CartMandates",),
    "_offer_queries": ("OfferReader", "Purchase", "UnpaidAttempt"),
    "_offer_table": ("Offer", "OfferState"),
    "_offers": ("OfferStore",),
    "_outcomes": ("OutcomeListener", "PaymentOutcome"),
    "_presented": ("Presentations",),
    "_pricing": ("Asset", "Pricing"),
    "_protocol": ("NEGOTIATED_VERSION_KEY", "protocol_version"),
    "_recovery": ("PaymentRecovery", "exception_line"),
    "_signed": ("SignedPayment", "nonce_used", "payment_from_wire", "valid_before"),
    "_sponsoring": ("GasSponsoring",),
    "_transfer_method": ("TransferMethod", "probe_transfer_method"),
    "_unpaid": ("CLIENT_ADDRESS_KEY", "PurgeReport", "UnpaidLimitError", "UnpaidWork", "caller_of"),
    "_unpaid_limits": ("InvalidLimitsError", "UnpaidRules"),
    "_upto": ("SupportedSource", "upto_address"),
    "_usage": ("UsageError", "UsageMeter", "usage_meter"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
