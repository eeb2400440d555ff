"""The content of extension messages: one frozen dataclass per payment status, checked when built.

Each holds exactly the fields its status allows (the table in `_metadata`); building one with
inconsistent content (a completed payment without a successful receipt, say) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, TypeAlias

from ._errors import ExtensionMetadataError, MetadataErrorCode, child_path
from ._states import RETRYABLE_ERROR_CODES, SETTLEMENT_PENDING_REASON, PaymentErrorCode, PaymentStatus
from ._usage import PaymentUsage
from ._x402 import (
    X402PaymentPayload,
    X402PaymentRequired,
    X402Receipt,
)

__all__ = [
    "PaymentCompletedData",
    "PaymentData",
    "PaymentFailedData",
    "PaymentRejectedData",
    "PaymentRequiredData",
    "PaymentSubmittedData",
    "PaymentVerifiedData",
]


def inconsistent(path: str, detail: str) -> ExtensionMetadataError:
    return ExtensionMetadataError(MetadataErrorCode.INCONSISTENT_CONTENT, detail, path)


def _check_receipts(receipts: tuple[X402Receipt, ...]) -> None:
    """Checks every status shares: a pending receipt names its transaction, and the history is a history.

    Every receipt but the newest records an attempt that failed for good (spec §6.3): a success ends the
    payment, and a pending settlement is resolved (and replaced) before any other attempt.
    """
    for index, receipt in enumerate(receipts):
        if receipt.error_reason == SETTLEMENT_PENDING_REASON and (receipt.success or not receipt.transaction):
            raise inconsistent(
                child_path("receipts", index),
                "a settlement_pending receipt must have success false and name its transaction hash",
            )
        if index < len(receipts) - 1 and (receipt.success or _is_pending(receipt)):
            raise inconsistent(
                child_path("receipts", index),
                "only the newest receipt may be a success or pending; earlier attempts failed",
            )


def _check_no_success(receipts: tuple[X402Receipt, ...], status: PaymentStatus) -> None:
    for index, receipt in enumerate(receipts):
        if receipt.success:
            raise inconsistent(
                child_path("receipts", index), f"a successful settlement contradicts status {status.value}"
            )


def _is_pending(receipt: X402Receipt) -> bool:
    return not receipt.success and receipt.error_reason == SETTLEMENT_PENDING_REASON


@dataclass(frozen=True, slots=True)
class PaymentRequiredData:
    """Merchant to client, task input-required: the payment terms.

    Attributes:
        required: the x402 payment terms.
        error: set when these are fresh terms after a retryable failure (``EXPIRED_PAYMENT`` or
            ``INSUFFICIENT_FUNDS``), so the payer learns why its last payment was not taken.
    """

    status: ClassVar[PaymentStatus] = PaymentStatus.PAYMENT_REQUIRED
    required: X402PaymentRequired
    error: PaymentErrorCode | None = None

    def __post_init__(self) -> None:
        if self.error is not None and self.error not in RETRYABLE_ERROR_CODES:
            raise inconsistent(
                "error", f"{self.error.value} is terminal: only a retryable failure comes with fresh terms"
            )


@dataclass(frozen=True, slots=True)
class PaymentSubmittedData:
    """Client to merchant: the signed payment for the task's terms."""

    status: ClassVar[PaymentStatus] = PaymentStatus.PAYMENT_SUBMITTED
    payload: X402PaymentPayload


@dataclass(frozen=True, slots=True)
class PaymentVerifiedData:
    """Merchant to client, task working: the payment verified.

    Attributes:
        receipts: empty, or the receipt history ending in a ``settlement_pending`` receipt
            when the settlement transaction is broadcast but not yet confirmed.
    """

    status: ClassVar[PaymentStatus] = PaymentStatus.PAYMENT_VERIFIED
    receipts: tuple[X402Receipt, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "receipts", tuple(self.receipts))
        _check_receipts(self.receipts)
        _check_no_success(self.receipts, self.status)
        if self.receipts and not _is_pending(self.receipts[-1]):
            raise inconsistent(
                child_path("receipts", len(self.receipts) - 1),
                "receipts on payment-verified report a pending settlement: the newest must be one",
            )

    @property
    def pending_transaction(self) -> str | None:
        """The hash of the settlement transaction awaiting confirmation, or ``None``."""
        return self.receipts[-1].transaction if self.receipts else None


@dataclass(frozen=True, slots=True)
class PaymentCompletedData:
    """Merchant to client: the payment settled; the newest receipt is the successful one.

    Attributes:
        receipts: every settlement attempt, newest last; the newest succeeded.
        usage: for a metered (``upto``) task, what it used and what was settled; when the successful
            receipt states the settled ``amount``, the two agree.
    """

    status: ClassVar[PaymentStatus] = PaymentStatus.PAYMENT_COMPLETED
    receipts: tuple[X402Receipt, ...]
    usage: PaymentUsage | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "receipts", tuple(self.receipts))
        _check_receipts(self.receipts)
        if not self.receipts or not self.receipts[-1].success:
            raise inconsistent(
                "receipts", "payment-completed needs a successful settlement as the newest receipt"
            )
        if self.usage is None:
            return
        if not isinstance(self.usage, PaymentUsage):
            raise ExtensionMetadataError(
                MetadataErrorCode.INVALID_TYPE,
                f"expected a PaymentUsage, got {type(self.usage).__name__}",
                "usage",
            )
        settled = getattr(self.receipts[-1], "amount", None)
        if settled is not None and settled != self.usage.settled:
            raise inconsistent("usage.settled", "must be the amount the successful receipt settled")


@dataclass(frozen=True, slots=True)
class PaymentFailedData:
    """Merchant to client: the payment failed.

    Attributes:
        error: why; whether the task ends or asks again is told by ``RETRYABLE_ERROR_CODES``.
        receipts: every settlement attempt, newest last; empty when verification already failed.
    """

    status: ClassVar[PaymentStatus] = PaymentStatus.PAYMENT_FAILED
    error: PaymentErrorCode
    receipts: tuple[X402Receipt, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "receipts", tuple(self.receipts))
        _check_receipts(self.receipts)
        _check_no_success(self.receipts, self.status)
        if self.receipts and _is_pending(self.receipts[-1]):
            raise inconsistent(
                child_path("receipts", len(self.receipts) - 1),
                "the settlement is still pending: report payment-verified until it resolves",
            )


@dataclass(frozen=True, slots=True)
class PaymentRejectedData:
    """Client to merchant: the payer declines the terms."""

    status: ClassVar[PaymentStatus] = PaymentStatus.PAYMENT_REJECTED


PaymentData: TypeAlias = (
    PaymentRequiredData
    | PaymentSubmittedData
    | PaymentVerifiedData
    | PaymentCompletedData
    | PaymentFailedData
    | PaymentRejectedData
)
"""The content of one extension message."""

DATA_TYPES: Mapping[PaymentStatus, type[PaymentData]] = {
    cls.status: cls
    for cls in (
        PaymentRequiredData,
        PaymentSubmittedData,
        PaymentVerifiedData,
        PaymentCompletedData,
        PaymentFailedData,
        PaymentRejectedData,
    )
}
