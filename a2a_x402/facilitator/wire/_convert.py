"""Conversions between x402 v1 and v2, so that the facilitator core works on v2 shapes only.

v1 → v2 for what comes in (requirements, payloads, request bodies), v2 → v1 for what goes out
(requirements offered to v1 payers, verify and settle answers). Legacy network names and chain
ids map one to one, so a v2 network converts back to the v1 name it came from.
"""

from __future__ import annotations

from typing import overload

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
from ._networks import (
    caip2_from_chain_id,
    chain_id_from_caip2,
    chain_id_from_v1_network,
    v1_network_from_chain_id,
)
from ._permit2 import Permit2PaymentPayload
from ._v1 import PaymentPayloadV1, PaymentRequirementsV1, SettleResponseV1, VerifyResponseV1
from ._v2 import PaymentPayload, PaymentRequirements, ResourceInfo, SettleResponse, VerifyResponse

__all__ = [
    "payload_v1_to_v2",
    "request_to_v2",
    "requirements_v1_to_v2",
    "requirements_v2_to_v1",
    "resource_info_from_v1",
    "settle_response_to_v1",
    "verify_response_to_v1",
]


def requirements_v1_to_v2(requirements: PaymentRequirementsV1) -> PaymentRequirements:
    """Return the v2 form of v1 requirements; the resource fields go to `resource_info_from_v1`."""
    return PaymentRequirements(
        scheme=requirements.scheme,
        network=caip2_from_chain_id(requirements.chain_id),
        asset=requirements.asset,
        amount=requirements.max_amount_required,
        pay_to=requirements.pay_to,
        max_timeout_seconds=requirements.max_timeout_seconds,
        extra=requirements.extra,
    )


def resource_info_from_v1(requirements: PaymentRequirementsV1) -> ResourceInfo:
    """Return the v2 `ResourceInfo` that v1 keeps inside each requirement."""
    return ResourceInfo(
        url=requirements.resource,
        description=requirements.description,
        mime_type=requirements.mime_type,
    )


def requirements_v2_to_v1(requirements: PaymentRequirements, resource: ResourceInfo) -> PaymentRequirementsV1:
    """Return the v1 form of v2 requirements for `resource`, to offer them to a v1 payer.

    `description` and `mimeType` are always present (empty when `resource` has none): v2 makes them
    optional, but v1 payers (the x402 0.2 Python models, the legacy TypeScript schema) refuse terms
    without them.

    Raises:
        WireError: `invalid_network` when the chain has no v1 name.
    """
    return PaymentRequirementsV1(
        scheme=requirements.scheme,
        network=v1_network_from_chain_id(requirements.chain_id),
        max_amount_required=requirements.amount,
        resource=resource.url,
        description=resource.description or "",
        mime_type=resource.mime_type or "",
        pay_to=requirements.pay_to,
        max_timeout_seconds=requirements.max_timeout_seconds,
        asset=requirements.asset,
        extra=requirements.extra,
    )


def payload_v1_to_v2(payload: PaymentPayloadV1, requirements: PaymentRequirements) -> PaymentPayload:
    """Return the v2 form of a v1 payload paying for (v2) `requirements`.

    v1 payloads name only the scheme and network they chose; `accepted` takes those two from
    the payload and the rest from `requirements`. A payload for another scheme or network thus
    still fails the core's scheme and network checks instead of being silently made to match.
    """
    accepted = PaymentRequirements(
        scheme=payload.scheme,
        network=caip2_from_chain_id(chain_id_from_v1_network(payload.network)),
        asset=requirements.asset,
        amount=requirements.amount,
        pay_to=requirements.pay_to,
        max_timeout_seconds=requirements.max_timeout_seconds,
        extra=requirements.extra,
    )
    return PaymentPayload(x402_version=2, payload=payload.payload, accepted=accepted)


@overload
def request_to_v2(
    request: VerifyRequest | SettleRequest | VerifyRequestV1 | SettleRequestV1,
) -> tuple[PaymentPayload, PaymentRequirements]: ...
@overload
def request_to_v2(
    request: ExactPermit2VerifyRequest | UptoVerifyRequest | ExactPermit2SettleRequest | UptoSettleRequest,
) -> tuple[Permit2PaymentPayload, PaymentRequirements]: ...
def request_to_v2(
    request: VerifyRequest
    | SettleRequest
    | VerifyRequestV1
    | SettleRequestV1
    | ExactPermit2VerifyRequest
    | UptoVerifyRequest
    | ExactPermit2SettleRequest
    | UptoSettleRequest,
) -> tuple[PaymentPayload | Permit2PaymentPayload, PaymentRequirements]:
    """Return the v2 payload and requirements of a `/verify` or `/settle` body of either version."""
    if isinstance(request, VerifyRequestV1 | SettleRequestV1):
        requirements = requirements_v1_to_v2(request.payment_requirements)
        return payload_v1_to_v2(request.payment_payload, requirements), requirements
    return request.payment_payload, request.payment_requirements


def verify_response_to_v1(response: VerifyResponse) -> VerifyResponseV1:
    """Return the v1 form of a verify answer; v2-only `extensions` and `extra` are dropped."""
    return VerifyResponseV1(
        is_valid=response.is_valid,
        invalid_reason=response.invalid_reason,
        invalid_message=response.invalid_message,
        payer=response.payer,
    )


def settle_response_to_v1(response: SettleResponse) -> SettleResponseV1:
    """Return the v1 form of a settle answer, naming the network by its legacy name.

    Raises:
        WireError: `invalid_network` when the chain has no v1 name.
    """
    return SettleResponseV1(
        success=response.success,
        error_reason=response.error_reason,
        error_message=response.error_message,
        payer=response.payer,
        transaction=response.transaction,
        network=v1_network_from_chain_id(chain_id_from_caip2(response.network)),
    )
