"""Bodies of the facilitator's `POST /verify` and `POST /settle`, for x402 v1 and v2.

Both endpoints take `{x402Version, paymentPayload, paymentRequirements}`. The body's version
fixes the version of both parts: a v2 body carrying a v1 payload is refused with
`invalid_x402_version`. Problems inside `paymentRequirements` are reported as
`invalid_payment_requirements`, all others as `invalid_payload`.

A v2 `/verify` or `/settle` body may carry a Permit2 payment (`exact` by Permit2, or `upto`), which has a
body of its own per scheme; the x402 SDKs send Permit2 payments in v2 only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

from ._base import WireModel
from ._permit2 import ExactPermit2PaymentPayload, UptoPaymentPayload
from ._primitives import version
from ._reasons import Reason
from ._v1 import PaymentPayloadV1, PaymentRequirementsV1
from ._v2 import PaymentPayload, PaymentRequirements

__all__ = [
    "ExactPermit2SettleRequest",
    "ExactPermit2VerifyRequest",
    "SettleRequest",
    "SettleRequestV1",
    "UptoSettleRequest",
    "UptoVerifyRequest",
    "VerifyRequest",
    "VerifyRequestV1",
]

_REASON_BY_FIELD: Mapping[str, Reason] = {
    "paymentPayload": Reason.INVALID_PAYLOAD,
    "paymentRequirements": Reason.INVALID_PAYMENT_REQUIREMENTS,
}


class _RequestV2(WireModel):
    wire_reason_by_field: ClassVar[Mapping[str, Reason]] = _REASON_BY_FIELD

    x402_version: Annotated[int, version(2)]
    payment_payload: PaymentPayload
    payment_requirements: PaymentRequirements


class _RequestV1(WireModel):
    wire_reason_by_field: ClassVar[Mapping[str, Reason]] = _REASON_BY_FIELD

    x402_version: Annotated[int, version(1)]
    payment_payload: PaymentPayloadV1
    payment_requirements: PaymentRequirementsV1


class VerifyRequest(_RequestV2):
    """A v2 `/verify` body: the payer's payload and the resource server's requirements."""


class SettleRequest(_RequestV2):
    """A v2 `/settle` body: the payer's payload and the resource server's requirements."""


class VerifyRequestV1(_RequestV1):
    """A v1 `/verify` body."""


class SettleRequestV1(_RequestV1):
    """A v1 `/settle` body."""


class _ExactPermit2Request(WireModel):
    wire_reason_by_field: ClassVar[Mapping[str, Reason]] = _REASON_BY_FIELD

    x402_version: Annotated[int, version(2)]
    payment_payload: ExactPermit2PaymentPayload
    payment_requirements: PaymentRequirements


class _UptoRequest(WireModel):
    wire_reason_by_field: ClassVar[Mapping[str, Reason]] = _REASON_BY_FIELD

    x402_version: Annotated[int, version(2)]
    payment_payload: UptoPaymentPayload
    payment_requirements: PaymentRequirements


class ExactPermit2VerifyRequest(_ExactPermit2Request):
    """A v2 `/verify` body carrying an `exact` payment made by Permit2."""


class ExactPermit2SettleRequest(_ExactPermit2Request):
    """A v2 `/settle` body carrying an `exact` payment made by Permit2."""


class UptoVerifyRequest(_UptoRequest):
    """A v2 `/verify` body carrying an `upto` payment (its requirements' `amount` is the maximum)."""


class UptoSettleRequest(_UptoRequest):
    """A v2 `/settle` body carrying an `upto` payment (its requirements' `amount` is what to charge)."""
