"""Errors raised by the payer, each with a stable ``code``.

The code is what the CLI prints and what callers branch on; the message is for people and may change.
Errors raised before anything was signed say so in ``signed`` (``False``): nothing can have moved on chain.

    PayerError                          payer_error
    ├── CardError                       card_invalid: not a card, no usable interface or terms
    │   ├── CardNotServedError          card_not_served: the card's URL answered other than 200 OK
    │   └── UntrustedCardError          card_untrusted: the verifier (policy ``require``) refused the card
    ├── PaymentRefusedError             payment_refused: the payer's own policy refused the merchant's terms
    │   ├── PayToNotPinnedError         pay_to_not_pinned: the terms pay an address the card does not list
    │   ├── AmountOverLimitError        amount_over_limit: the terms ask more than a cap of the policy
    │   ├── UptoDayCapUnavailableError  upto_day_cap_unavailable: the file of the day's upto cap is unusable
    │   ├── NoAcceptableTermsError      no_acceptable_terms: no entry of ``accepts`` the payer can sign
    │   ├── MandateConstraintError      mandate_constraint: the user's open AP2 mandates do not allow it
    │   ├── MandatesRequiredError       mandates_required: the tenant takes only AP2 mandates; none to give
    │   ├── CheckoutInvalidError        ap2_checkout_invalid: the AP2 checkout fails the checks of §20.3
    │   └── Permit2NotApprovedError     permit2_not_approved: Permit2 may not move the token, nor be let
    ├── ChainError                      chain_unavailable: the payer could not read what it needs on chain
    ├── MerchantError                   merchant_error: the merchant answered outside the protocol or refused
    │   └── MandatesRefusedError        mandates_refused: the merchant refused the AP2 mandates
    │       ├── UnresolvedConstraintError  unresolved_constraint: a constraint it cannot evaluate
    │       └── MandatesNotSupportedError  mandates_not_supported: it takes no mandates from this payer
    ├── PaymentFailedError              payment_failed: the task ended without the result (code, receipts)
    ├── InsufficientFundsError          insufficient_funds: the payer holds less than the price
    ├── PaymentAttemptsExhaustedError   payment_attempts_exhausted: fresh terms kept coming
    ├── PaymentPendingError             payment_pending: the settlement did not resolve in time
    └── MerchantUnreachableError        merchant_unreachable: transport errors outlasted every retry
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import TaskState

from a2a_x402.agentcard import VerificationResult
from a2a_x402.extension import Ap2Receipts, PaymentErrorCode, X402Receipt
from a2a_x402.facilitator.wire import PaymentRequirements

__all__ = [
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
    "PayToNotPinnedError",
    "PayerError",
    "PaymentAttemptsExhaustedError",
    "PaymentFailedError",
    "PaymentPendingError",
    "PaymentRefusedError",
    "Permit2NotApprovedError",
    "UnresolvedConstraintError",
    "UntrustedCardError",
    "UptoDayCapUnavailableError",
]


class PayerError(Exception):
    """Root of every exception the payer raises on purpose.

    Attributes:
        code: the stable machine-readable reason.
        task_id: the merchant's task, when one exists.
        signed: whether a payment authorization had been signed when this was raised.
    """

    code: str = "payer_error"

    def __init__(self, message: str, *, task_id: str | None = None, signed: bool = False) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.signed = signed


class CardError(PayerError):
    """The Agent Card cannot be used: not fetched, not a card, or no interface or x402 terms to pay with."""

    code = "card_invalid"


class CardNotServedError(CardError):
    """The card's URL answered, but not with a card (404, a server error): nothing is wrong with a card."""

    code = "card_not_served"


class UntrustedCardError(CardError):
    """The card verifier, under policy ``require``, did not accept the card's signature.

    Attributes:
        verification: what the verifier found, signature by signature.
    """

    code = "card_untrusted"

    def __init__(self, message: str, *, verification: VerificationResult) -> None:
        super().__init__(message)
        self.verification = verification


class PaymentRefusedError(PayerError):
    """The payer's policy refused the merchant's terms; nothing was signed."""

    code = "payment_refused"


class PayToNotPinnedError(PaymentRefusedError):
    """The terms pay an address the card does not list for that network and tenant."""

    code = "pay_to_not_pinned"


class AmountOverLimitError(PaymentRefusedError):
    """The terms ask for more than a cap of the policy: its maximum per payment, or for ``upto`` its cap
    per task or what is left of its cap per day."""

    code = "amount_over_limit"


class MandateConstraintError(PaymentRefusedError):
    """The user's open AP2 mandates do not allow this payment (§20.4), or cannot be closed over it: no
    mandate was presented.

    Attributes:
        constraint: what refused it: a constraint type of the open mandates (``payment.budget``), or
            ``exp``, ``merchant``, ``nonce``, ``agent_key``, ``form``, ``sdk``.
    """

    code = "mandate_constraint"

    def __init__(self, constraint: str, detail: str) -> None:
        super().__init__(f"{constraint}: {' '.join(detail.split())}")
        self.constraint = constraint


class MandatesRequiredError(PaymentRefusedError):
    """The tenant's ``params.ap2`` entry says ``required: true`` and the payer has no mandates to present
    (or the merchant offered no checkout to present them for): nothing was signed."""

    code = "mandates_required"


class CheckoutInvalidError(PaymentRefusedError):
    """The task's ``ap2-checkout`` fails a check of §20.3: its signature with the tenant's ``jwksUrl`` keys,
    its ``x402`` claim against the terms, its merchant, the price rule, or its expiry. No payment is made
    for such a checkout, with mandates or without: nothing was signed."""

    code = "ap2_checkout_invalid"


class UptoDayCapUnavailableError(PaymentRefusedError):
    """The policy counts its ``upto`` cap per day in a file that could not be read or written: the terms are
    refused rather than signed uncounted."""

    code = "upto_day_cap_unavailable"


class NoAcceptableTermsError(PaymentRefusedError):
    """No entry of ``accepts`` uses a scheme, network and asset the payer and the card agree on."""

    code = "no_acceptable_terms"


class Permit2NotApprovedError(PaymentRefusedError):
    """Paying by Permit2 needs Permit2's allowance on the token: the payer's falls short, and the token has
    no EIP-2612 permit to grant it in the payment. Approving Permit2 once (``x402-pay approve-permit2``)
    cures it; nothing was signed."""

    code = "permit2_not_approved"


class ChainError(PayerError):
    """The payer could not read on chain what it must know before signing (its Permit2 allowance, the
    token's EIP-2612 state), or send its Permit2 approval: no RPC URL for the network, no answer, a node of
    another chain, a refused transaction.

    Attributes:
        reverted: the node answered that the call reverted (a contract without the function, say).
    """

    code = "chain_unavailable"

    def __init__(self, message: str, *, reverted: bool = False) -> None:
        super().__init__(message)
        self.reverted = reverted


class MerchantError(PayerError):
    """The merchant refused a request or answered in a way the extension does not allow."""

    code = "merchant_error"


class MandatesRefusedError(MerchantError):
    """The merchant refused the AP2 mandates presented with the payment (§20.6): the payment was not
    recorded, nothing moved on chain, and the payer's own use of the open mandate was taken back.

    Attributes:
        ap2_error: the merchant's ``ap2Error`` (``invalid_credential``, ``invalid_mandate``, ...).
        receipts: the merchant's error receipts, when it sent them and they verified.
    """

    code = "mandates_refused"

    def __init__(self, message: str, *, ap2_error: str, receipts: Ap2Receipts | None, task_id: str) -> None:
        super().__init__(message, task_id=task_id, signed=True)
        self.ap2_error = ap2_error
        self.receipts = receipts


class UnresolvedConstraintError(MandatesRefusedError):
    """The merchant cannot evaluate a constraint of the open mandates (``unresolved_constraint``): the
    caller may answer with closed mandates the user signs directly (user present)."""

    code = "unresolved_constraint"


class MandatesNotSupportedError(MandatesRefusedError):
    """The merchant takes no mandates of this kind for the tenant (``mandates_not_supported``), and the
    policy does not allow paying without them (``PaymentPolicy.ap2_standalone_fallback``)."""

    code = "mandates_not_supported"


class PaymentFailedError(PayerError):
    """The task ended (failed, canceled, rejected) without delivering its result.

    Attributes:
        state: the task's final state.
        error: the extension's error code, when the merchant gave one.
        receipts: every settlement attempt the merchant reported, newest last.
    """

    code = "payment_failed"

    def __init__(
        self,
        message: str,
        *,
        task_id: str,
        state: TaskState,
        error: PaymentErrorCode | None,
        receipts: Sequence[X402Receipt],
        signed: bool,
    ) -> None:
        super().__init__(message, task_id=task_id, signed=signed)
        self.state = state
        self.error = error
        self.receipts = tuple(receipts)


class InsufficientFundsError(PayerError):
    """The merchant refused a signed payment because the payer's balance is below the price.

    Another signature cannot cure that, so the run stops at the first such refusal unless an
    ``on_fresh_terms`` hook may top the payer up. Nothing moved on chain, but the refused authorization
    was signed (``signed`` is ``True``).

    Attributes:
        payer: the paying address.
        refused: the terms of the refused payment (its price is ``refused.amount`` atomic units).
    """

    code = "insufficient_funds"

    def __init__(self, refused: PaymentRequirements, *, payer: str, task_id: str) -> None:
        super().__init__(
            f"the payer's balance is too low for the price: {payer} holds less than {refused.amount} "
            f"atomic units of {refused.asset} on {refused.network}; fund it and try again",
            task_id=task_id,
            signed=True,
        )
        self.payer = payer
        self.refused = refused


class PaymentAttemptsExhaustedError(PayerError):
    """The merchant asked for a new payment more often than the payer allows for one request.

    Attributes:
        error: the reason the merchant gave with its last fresh terms.
    """

    code = "payment_attempts_exhausted"

    def __init__(self, message: str, *, task_id: str, error: PaymentErrorCode | None) -> None:
        super().__init__(message, task_id=task_id, signed=True)
        self.error = error


class PaymentPendingError(PayerError):
    """The merchant's settlement was still unresolved when the payer stopped waiting.

    Attributes:
        transaction: the settlement transaction to watch, when the merchant named it.
    """

    code = "payment_pending"

    def __init__(self, message: str, *, task_id: str, transaction: str | None) -> None:
        super().__init__(message, task_id=task_id, signed=True)
        self.transaction = transaction


class MerchantUnreachableError(PayerError):
    """Transport errors (timeouts, lost answers) outlasted every retry; the outcome is unknown."""

    code = "merchant_unreachable"
