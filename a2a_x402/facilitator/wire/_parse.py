"""Entry points that parse untrusted x402 documents of either version.

Each takes a decoded JSON value (what `json.loads` returns), reads `x402Version` to choose the
v1 or v2 model, and parses strictly. The only exception they raise is `WireError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, overload

from ._api import (
    ExactPermit2SettleRequest,
    ExactPermit2VerifyRequest,
    SettleRequest,
    SettleRequestV1,
    UptoSettleRequest,
    UptoVerifyRequest,
    VerifyRequest,
    VerifyRequestV1,
)
from ._errors import WireError, json_type_name
from ._reasons import Reason
from ._v1 import PaymentPayloadV1, PaymentRequiredV1, PaymentRequirementsV1
from ._v2 import PaymentPayload, PaymentRequired, PaymentRequirements

__all__ = [
    "parse_payment_payload",
    "parse_payment_required",
    "parse_payment_requirements",
    "parse_settle_request",
    "parse_verify_request",
]


def _check_version(value: object) -> Literal[1, 2]:
    if isinstance(value, bool) or not isinstance(value, int):
        detail = f"expected an integer, got {json_type_name(value)}"
        raise WireError(Reason.INVALID_X402_VERSION, detail, "x402Version")
    if value == 1:
        return 1
    if value == 2:
        return 2
    shown = f" {value}" if -1000 < value < 1000 else ""
    detail = f"unsupported version{shown} (supported: 1, 2)"
    raise WireError(Reason.INVALID_X402_VERSION, detail, "x402Version")


def _read_version(data: object, not_an_object: Reason) -> Literal[1, 2]:
    if not isinstance(data, Mapping):
        raise WireError(not_an_object, f"expected a JSON object, got {json_type_name(data)}")
    if "x402Version" not in data:
        raise WireError(Reason.INVALID_X402_VERSION, "required field is missing", "x402Version")
    return _check_version(data["x402Version"])


def parse_payment_payload(data: object) -> PaymentPayload | PaymentPayloadV1:
    """Parse a payer's payment payload (the decoded `PAYMENT-SIGNATURE` / `X-PAYMENT` value).

    Raises:
        WireError: `invalid_x402_version` or `invalid_payload`.
    """
    if _read_version(data, Reason.INVALID_PAYLOAD) == 2:
        return PaymentPayload.from_wire(data)
    return PaymentPayloadV1.from_wire(data)


@overload
def parse_payment_requirements(data: object, version: Literal[2]) -> PaymentRequirements: ...
@overload
def parse_payment_requirements(data: object, version: Literal[1]) -> PaymentRequirementsV1: ...
@overload
def parse_payment_requirements(data: object, version: int) -> PaymentRequirements | PaymentRequirementsV1: ...
def parse_payment_requirements(data: object, version: int) -> PaymentRequirements | PaymentRequirementsV1:
    """Parse one payment requirements object of the given x402 version (it carries none itself).

    Raises:
        WireError: `invalid_x402_version` for an unknown `version`, else `invalid_payment_requirements`.
    """
    if _check_version(version) == 2:
        return PaymentRequirements.from_wire(data)
    return PaymentRequirementsV1.from_wire(data)


def parse_payment_required(data: object) -> PaymentRequired | PaymentRequiredV1:
    """Parse a 402 answer body (or the decoded `PAYMENT-REQUIRED` header).

    Raises:
        WireError: `invalid_x402_version` or `invalid_payment_requirements`.
    """
    if _read_version(data, Reason.INVALID_PAYMENT_REQUIREMENTS) == 2:
        return PaymentRequired.from_wire(data)
    return PaymentRequiredV1.from_wire(data)


def parse_verify_request(
    data: object,
) -> VerifyRequest | VerifyRequestV1 | ExactPermit2VerifyRequest | UptoVerifyRequest:
    """Parse a `POST /verify` body; both parts must have the body's x402 version.

    A v2 payment whose `payload` carries `permit2Authorization` is a Permit2 one, of the `upto` scheme when
    its `accepted.scheme` says so and of `exact` otherwise (whose parse then refuses any other scheme).

    Raises:
        WireError: `invalid_x402_version`, `invalid_payload` or `invalid_payment_requirements`.
    """
    if _read_version(data, Reason.INVALID_PAYLOAD) == 1:
        return VerifyRequestV1.from_wire(data)
    kind = _permit2_scheme(data)
    if kind == "upto":
        return UptoVerifyRequest.from_wire(data)
    if kind == "exact":
        return ExactPermit2VerifyRequest.from_wire(data)
    return VerifyRequest.from_wire(data)


def _permit2_scheme(data: object) -> Literal["exact", "upto"] | None:
    """Which Permit2 body a v2 request is: None when its `payload` carries no `permit2Authorization`, else
    `upto` when its `accepted.scheme` says so and `exact` otherwise (whose parse refuses any other scheme)."""
    payment = data.get("paymentPayload") if isinstance(data, Mapping) else None
    payload = payment.get("payload") if isinstance(payment, Mapping) else None
    if not isinstance(payload, Mapping) or "permit2Authorization" not in payload:
        return None
    accepted = payment.get("accepted") if isinstance(payment, Mapping) else None
    return "upto" if isinstance(accepted, Mapping) and accepted.get("scheme") == "upto" else "exact"


def parse_settle_request(
    data: object,
) -> SettleRequest | SettleRequestV1 | ExactPermit2SettleRequest | UptoSettleRequest:
    """Parse a `POST /settle` body; both parts must have the body's x402 version.

    A v2 Permit2 payment is read as `parse_verify_request` reads it.

    Raises:
        WireError: `invalid_x402_version`, `invalid_payload` or `invalid_payment_requirements`.
    """
    if _read_version(data, Reason.INVALID_PAYLOAD) == 1:
        return SettleRequestV1.from_wire(data)
    kind = _permit2_scheme(data)
    if kind == "upto":
        return UptoSettleRequest.from_wire(data)
    if kind == "exact":
        return ExactPermit2SettleRequest.from_wire(data)
    return SettleRequest.from_wire(data)
