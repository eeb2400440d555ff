"""Payment statuses, payment error codes, and how facilitator reasons map onto them.

The statuses and codes are the extension's own vocabulary (identical in v0.2 and v0.3). The
facilitator speaks x402 reason strings (``invalidReason`` / ``errorReason``), which differ between
the x402 spec and its SDKs; ``REASON_ERROR_CODES`` folds the known spellings onto the seven
extension codes, and everything unknown becomes ``SETTLEMENT_FAILED``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "REASON_ERROR_CODES",
    "RETRYABLE_ERROR_CODES",
    "SETTLEMENT_PENDING_REASON",
    "PaymentErrorCode",
    "PaymentStatus",
    "error_code_for_reason",
    "reason_name",
]


class PaymentStatus(StrEnum):
    """The stage of the payment flow carried by every extension message."""

    PAYMENT_REQUIRED = "payment-required"
    """Merchant: here are the payment terms (task is input-required)."""
    PAYMENT_SUBMITTED = "payment-submitted"
    """Client: here is the signed payment payload."""
    PAYMENT_VERIFIED = "payment-verified"
    """Merchant: the payload verified; work or settlement is under way (task is working)."""
    PAYMENT_COMPLETED = "payment-completed"
    """Merchant: the payment settled on chain; receipts attached."""
    PAYMENT_FAILED = "payment-failed"
    """Merchant: the payment failed; error code and receipts attached."""
    PAYMENT_REJECTED = "payment-rejected"
    """Client: declines the payment terms."""


class PaymentErrorCode(StrEnum):
    """Why a payment failed, as carried in the extension's ``error`` field."""

    INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
    INVALID_SIGNATURE = "INVALID_SIGNATURE"
    EXPIRED_PAYMENT = "EXPIRED_PAYMENT"
    DUPLICATE_NONCE = "DUPLICATE_NONCE"
    NETWORK_MISMATCH = "NETWORK_MISMATCH"
    INVALID_AMOUNT = "INVALID_AMOUNT"
    SETTLEMENT_FAILED = "SETTLEMENT_FAILED"


RETRYABLE_ERROR_CODES: frozenset[PaymentErrorCode] = frozenset(
    {PaymentErrorCode.EXPIRED_PAYMENT, PaymentErrorCode.INSUFFICIENT_FUNDS}
)
"""Failures a fresh attempt can cure: the task goes back to input-required with new terms.

An expired authorization only needs re-signing, and a payer short of funds can top up. Every
other code means the payer sent something wrong or the chain refused it for good, so the task
ends in the failed state.
"""

SETTLEMENT_PENDING_REASON = "settlement_pending"
"""The x402 reason for "broadcast, receipt not yet known": not a failure, the payment may still land."""

REASON_ERROR_CODES: Mapping[str, PaymentErrorCode] = MappingProxyType(
    {
        # Balance. The x402 spec spelling, then the SDKs' EVM and Permit2 spellings.
        "insufficient_funds": PaymentErrorCode.INSUFFICIENT_FUNDS,
        "invalid_exact_evm_insufficient_balance": PaymentErrorCode.INSUFFICIENT_FUNDS,
        "insufficient_balance": PaymentErrorCode.INSUFFICIENT_FUNDS,
        "permit2_insufficient_balance": PaymentErrorCode.INSUFFICIENT_FUNDS,
        # Signature. Spec and Python SDK, then the TypeScript/Go spelling. A smart wallet that is
        # not deployed (and brings no ERC-6492 data, or names a factory the facilitator does not
        # deploy through) has a signature nobody can check.
        "invalid_exact_evm_payload_signature": PaymentErrorCode.INVALID_SIGNATURE,
        "invalid_exact_evm_signature": PaymentErrorCode.INVALID_SIGNATURE,
        "invalid_exact_evm_failed_to_verify_signature": PaymentErrorCode.INVALID_SIGNATURE,
        "invalid_exact_evm_failed_to_parse_signature": PaymentErrorCode.INVALID_SIGNATURE,
        "invalid_permit2_signature": PaymentErrorCode.INVALID_SIGNATURE,
        "invalid_exact_evm_payload_undeployed_smart_wallet": PaymentErrorCode.INVALID_SIGNATURE,
        "eip6492_factory_not_allowed": PaymentErrorCode.INVALID_SIGNATURE,
        # Validity window (spec v0.3 §7.5): an authorization expired *or not yet valid* is
        # EXPIRED_PAYMENT, retryable with fresh terms. Either way it is outside its window now, and
        # fresh terms let the payer sign a window that covers now (a node lagging the wall clock
        # gets its second simulation at the clock's time first). The client text says "not valid at
        # this time", never "expired".
        "invalid_exact_evm_payload_authorization_valid_before": PaymentErrorCode.EXPIRED_PAYMENT,
        "invalid_exact_evm_payload_authorization_valid_after": PaymentErrorCode.EXPIRED_PAYMENT,
        "permit2_deadline_expired": PaymentErrorCode.EXPIRED_PAYMENT,
        "permit2_not_yet_valid": PaymentErrorCode.EXPIRED_PAYMENT,
        # Replay. An EIP-3009 nonce, and a Permit2 one, is single use; a second settlement of the same
        # payment is the same fault seen from the other side.
        "invalid_exact_evm_nonce_already_used": PaymentErrorCode.DUPLICATE_NONCE,
        "permit2_invalid_nonce": PaymentErrorCode.DUPLICATE_NONCE,
        "duplicate_settlement": PaymentErrorCode.DUPLICATE_NONCE,
        # Network. Python SDK, x402 spec, TypeScript/Go spellings.
        "network_mismatch": PaymentErrorCode.NETWORK_MISMATCH,
        "invalid_network": PaymentErrorCode.NETWORK_MISMATCH,
        "invalid_exact_evm_network_mismatch": PaymentErrorCode.NETWORK_MISMATCH,
        "unsupported_network": PaymentErrorCode.NETWORK_MISMATCH,
        # Amount. x402 v2 spec and Python SDK, x402 v1 spec, TypeScript, Permit2.
        "invalid_exact_evm_payload_authorization_value_mismatch": PaymentErrorCode.INVALID_AMOUNT,
        "invalid_exact_evm_payload_authorization_value": PaymentErrorCode.INVALID_AMOUNT,
        "invalid_exact_evm_authorization_value": PaymentErrorCode.INVALID_AMOUNT,
        "permit2_amount_mismatch": PaymentErrorCode.INVALID_AMOUNT,
    }
)
"""Known x402 facilitator reasons and the extension error code each one means.

Reasons not listed (reverts, ``invalid_transaction_state``, ``unexpected_settle_error``, recipient
mismatches, RPC trouble, ...) are read from their text (``error_code_for_reason``), else mean
``SETTLEMENT_FAILED``.
"""

# A reason that names no known code (a simulation or a transaction that reverted, a facilitator's own
# name, an exception's text in place of a name) is read by the token's revert text, which it or its message
# quotes: FiatToken's and OpenZeppelin's strings, their custom errors by name and by selector
# (`ERC20InsufficientBalance` is 0xe450d38c), and the TypeScript SDK's own classification words. "Insufficient
# funds" alone is not the payer's: nodes say it of the relayer's gas.
_REVERT_TEXTS: tuple[tuple[re.Pattern[str], PaymentErrorCode], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), code)
    for pattern, code in (
        (
            r"exceeds balance|insufficient[ _]balance|ERC20InsufficientBalance|0xe450d38c",
            PaymentErrorCode.INSUFFICIENT_FUNDS,
        ),
        (
            r"authorization is used|used or canceled|AuthorizationAlreadyUsed|AuthorizationUsedOrCanceled"
            r"|nonce[ _]already[ _]used",
            PaymentErrorCode.DUPLICATE_NONCE,
        ),
        (r"authorization is expired|AuthorizationExpired", PaymentErrorCode.EXPIRED_PAYMENT),
        (r"authorization is not yet valid|AuthorizationNotYetValid", PaymentErrorCode.EXPIRED_PAYMENT),
        (
            r"invalid[ _]signature|SignerMismatch|InvalidSignatureV|InvalidSignatureS",
            PaymentErrorCode.INVALID_SIGNATURE,
        ),
    )
)

# A well-formed reason name: what a reason longer than this or with other characters is not (free text).
_REASON_NAME = re.compile(r"[a-z0-9_]{1,100}")


def error_code_for_reason(reason: str | None, message: str | None = None) -> PaymentErrorCode:
    """Map an x402 ``invalidReason``/``errorReason`` (and its message) to the extension's error code.

    Args:
        reason: the facilitator's reason string. A known name (``REASON_ERROR_CODES``, both SDKs' spellings
            and ours) is mapped as is; ``name: text`` (the TypeScript SDK appends a revert's text) is read
            by its name, then its text.
        message: the facilitator's ``invalidMessage``/``errorMessage``, read when the reason names no code
            (e.g. ``invalid_exact_evm_transaction_simulation_failed`` with the token's revert text).

    Returns:
        The code the name means; else the code the quoted revert text means; else ``SETTLEMENT_FAILED``.

    Raises:
        ValueError: for ``settlement_pending``, which is not a failure; the caller must report the
            payment as verified with a pending receipt instead of failing it.
    """
    if reason == SETTLEMENT_PENDING_REASON:
        raise ValueError("settlement_pending is not a failure: the transaction may still be mined")
    if not reason and not message:
        return PaymentErrorCode.SETTLEMENT_FAILED
    name, _, appended = (reason or "").partition(":")
    known = REASON_ERROR_CODES.get(name.strip())
    if known is not None:
        return known
    text = " ".join(part for part in (reason, appended, message) if part)
    for pattern, code in _REVERT_TEXTS:
        if pattern.search(text):
            return code
    return PaymentErrorCode.SETTLEMENT_FAILED


def reason_name(reason: str | None) -> str | None:
    """`reason` if it is a reason name (lower-case letters, digits, underscores), else its name part before
    a colon if that is one, else None: what of a facilitator's reason may be shown to a client."""
    if not reason:
        return None
    name = reason.partition(":")[0].strip()
    return name if _REASON_NAME.fullmatch(name) else None
