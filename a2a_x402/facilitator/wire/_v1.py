"""x402 v1 documents, as spoken by A2A 0.3 clients of the a2a-x402 v0.2 extension.

v1 names networks by legacy names (`base-sepolia`), calls the amount `maxAmountRequired`, keeps
the resource description inside each requirement, and puts scheme and network at the top of
the payload. The EIP-3009 payload itself is the same as in v2. Optional fields may be `null`:
the a2a-x402 Python package serialises without dropping them.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, ValidationInfo, field_validator

from ._base import WireModel
from ._networks import V1Network, chain_id_from_v1_network
from ._primitives import (
    Address,
    Description,
    ErrorMessage,
    MimeType,
    OutputSchema,
    ReasonText,
    RequirementsExtra,
    Scheme,
    TimeoutSeconds,
    TxHash,
    Uint256,
    Url,
    WireBool,
    fail,
    version,
)
from ._reasons import Reason
from ._v2 import MAX_ACCEPTS, ExactEvmPayload

__all__ = [
    "PaymentPayloadV1",
    "PaymentRequiredV1",
    "PaymentRequirementsV1",
    "SettleResponseV1",
    "VerifyResponseV1",
]


class PaymentRequirementsV1(WireModel):
    """One way to pay, in v1 form (an entry of `accepts`)."""

    wire_reason: ClassVar[Reason] = Reason.INVALID_PAYMENT_REQUIREMENTS

    scheme: Scheme
    network: V1Network
    max_amount_required: Uint256
    resource: Url
    description: Description
    mime_type: MimeType | None = None
    pay_to: Address
    max_timeout_seconds: TimeoutSeconds
    asset: Address
    output_schema: OutputSchema | None = None
    extra: RequirementsExtra | None = None

    @property
    def chain_id(self) -> int:
        """The EVM chain id of the legacy `network` name."""
        return chain_id_from_v1_network(self.network)


class PaymentRequiredV1(WireModel):
    """The v1 402 body (the a2a-x402 `x402.payment.required` metadata value)."""

    wire_reason: ClassVar[Reason] = Reason.INVALID_PAYMENT_REQUIREMENTS

    x402_version: Annotated[int, version(1)]
    error: ErrorMessage | None = None
    accepts: Annotated[tuple[PaymentRequirementsV1, ...], Field(min_length=1, max_length=MAX_ACCEPTS)]


class PaymentPayloadV1(WireModel):
    """The v1 signed payment (the a2a-x402 `x402.payment.payload` metadata value)."""

    x402_version: Annotated[int, version(1)]
    scheme: Scheme
    network: V1Network
    payload: ExactEvmPayload


class VerifyResponseV1(WireModel):
    """The facilitator's answer to a v1 `/verify`."""

    is_valid: WireBool
    invalid_reason: ReasonText | None = None
    invalid_message: ErrorMessage | None = None
    payer: Address | None = None


class SettleResponseV1(WireModel):
    """The facilitator's answer to a v1 `/settle`; also an a2a-x402 `x402.payment.receipts` entry.

    a2a-x402 receipts may leave `transaction` out on failure; a successful settlement must name it.
    """

    success: WireBool
    error_reason: ReasonText | None = None
    error_message: ErrorMessage | None = None
    payer: Address | None = None
    # Validated even when absent, so that the success check below always runs.
    transaction: TxHash | None = Field(default=None, validate_default=True)
    network: V1Network

    @field_validator("transaction")
    @classmethod
    def _success_needs_transaction(cls, value: str | None, info: ValidationInfo) -> str | None:
        if not value and info.data.get("success") is True:
            fail("a successful settlement must name its transaction hash")
        return value
