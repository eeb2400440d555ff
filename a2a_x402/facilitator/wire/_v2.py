"""x402 v2 documents, with the EIP-3009 payload of the `exact` scheme on EVM.

Field order follows the x402 Python SDK's models, so documents it produces dump back byte for
byte. Networks are CAIP-2 `eip155:<chainId>`; amounts are uint256 decimal strings on the wire.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Final

from pydantic import Field, PlainValidator, ValidationInfo, field_validator, model_validator

from ._base import WireModel
from ._errors import json_type_name
from ._networks import Caip2Network, caip2_problem, chain_id_from_caip2, v1_network_problem
from ._primitives import (
    Address,
    Bytes32,
    Description,
    ErrorMessage,
    ExtensionName,
    Extensions,
    KindExtra,
    MimeType,
    ReasonText,
    RequirementsExtra,
    ResponseExtra,
    Scheme,
    ServiceName,
    Signature,
    Tag,
    TimeoutSeconds,
    TxHash,
    Uint256,
    UnixTime,
    Url,
    WireBool,
    fail,
    version,
)
from ._reasons import Reason

__all__ = [
    "MAX_ACCEPTS",
    "ExactEvmAuthorization",
    "ExactEvmPayload",
    "PaymentPayload",
    "PaymentRequired",
    "PaymentRequirements",
    "ResourceInfo",
    "SettleResponse",
    "SupportedKind",
    "SupportedResponse",
    "VerifyResponse",
]

# An offer lists a handful of networks and assets; 32 leaves room without inviting abuse.
MAX_ACCEPTS: Final = 32


class ResourceInfo(WireModel):
    """The paid resource: its URL and how to describe it to a payer."""

    url: Url
    description: Description | None = None
    mime_type: MimeType | None = None
    service_name: ServiceName | None = None
    tags: Annotated[tuple[Tag, ...], Field(max_length=5)] | None = None
    icon_url: Url | None = None


class PaymentRequirements(WireModel):
    """One way to pay that a resource server accepts (an entry of `accepts`)."""

    wire_reason: ClassVar[Reason] = Reason.INVALID_PAYMENT_REQUIREMENTS

    scheme: Scheme
    network: Caip2Network
    asset: Address
    amount: Uint256
    pay_to: Address
    max_timeout_seconds: TimeoutSeconds
    extra: RequirementsExtra | None = None

    @property
    def chain_id(self) -> int:
        """The EVM chain id of `network`."""
        return chain_id_from_caip2(self.network)


class PaymentRequired(WireModel):
    """The body of a 402 answer (or the `PAYMENT-REQUIRED` header): what the resource costs."""

    wire_reason: ClassVar[Reason] = Reason.INVALID_PAYMENT_REQUIREMENTS

    x402_version: Annotated[int, version(2)]
    error: ErrorMessage | None = None
    resource: ResourceInfo
    accepts: Annotated[tuple[PaymentRequirements, ...], Field(min_length=1, max_length=MAX_ACCEPTS)]
    extensions: Extensions | None = None


class ExactEvmAuthorization(WireModel):
    """The EIP-3009 `TransferWithAuthorization` message the payer signed."""

    from_address: Address = Field(alias="from")
    to: Address
    value: Uint256
    valid_after: UnixTime
    valid_before: UnixTime
    nonce: Bytes32


class ExactEvmPayload(WireModel):
    """The `exact` scheme's EVM payload: an EIP-3009 authorization and its signature.

    A 65-byte signature is an EOA's r‖s‖v; anything else is for a contract wallet (EIP-1271,
    possibly wrapped in ERC-6492). A Permit2 payload is refused here: it has documents of its own.
    """

    authorization: ExactEvmAuthorization
    signature: Signature

    @model_validator(mode="before")
    @classmethod
    def _refuse_permit2(cls, data: Any) -> Any:
        if isinstance(data, dict) and "permit2Authorization" in data:
            fail("Permit2 payloads are not supported; expected an EIP-3009 authorization")
        return data


class PaymentPayload(WireModel):
    """What the payer sends back: the signed payment for the requirements it `accepted`."""

    x402_version: Annotated[int, version(2)]
    payload: ExactEvmPayload
    accepted: PaymentRequirements
    resource: ResourceInfo | None = None
    extensions: Extensions | None = None


class VerifyResponse(WireModel):
    """The facilitator's answer to `/verify`. `invalidReason` is free text from other facilitators."""

    is_valid: WireBool
    invalid_reason: ReasonText | None = None
    invalid_message: ErrorMessage | None = None
    payer: Address | None = None
    extensions: Extensions | None = None
    extra: ResponseExtra | None = None


class SettleResponse(WireModel):
    """The facilitator's answer to `/settle`.

    `transaction` is "" when nothing was broadcast; a successful settlement names its transaction, so
    `success: true` with an empty `transaction` is refused, unless it settled an `amount` of 0 (an `upto`
    payment that used nothing: x402's `upto` scheme sends no transaction for it).
    """

    success: WireBool
    error_reason: ReasonText | None = None
    error_message: ErrorMessage | None = None
    payer: Address | None = None
    # Before `transaction`, whose check reads it.
    amount: Uint256 | None = None
    transaction: TxHash
    network: Caip2Network
    extensions: Extensions | None = None
    extra: ResponseExtra | None = None

    @field_validator("transaction")
    @classmethod
    def _success_needs_transaction(cls, value: str, info: ValidationInfo) -> str:
        if value == "" and info.data.get("success") is True and info.data.get("amount") != 0:
            fail("a successful settlement must name its transaction hash (only a settlement of 0 names none)")
        return value


class SupportedKind(WireModel):
    """One (version, scheme, network) a facilitator can verify and settle.

    The network is CAIP-2 for `x402Version` 2 and a legacy name for version 1.
    """

    x402_version: Annotated[int, version(1, 2)]
    scheme: Scheme
    network: str
    extra: KindExtra | None = None

    @field_validator("network", mode="plain")
    @classmethod
    def _network_matches_version(cls, value: object, info: ValidationInfo) -> str:
        if not isinstance(value, str):
            fail(f"expected a network string, got {json_type_name(value)}")
        known_version = info.data.get("x402_version")
        if known_version == 1:
            problem = v1_network_problem(value)
        elif known_version == 2:
            problem = caip2_problem(value)
        else:
            # The version itself failed; that error is the one reported.
            fail("depends on a valid x402Version")
        if problem is not None:
            fail(problem)
        return str.__str__(value)


_SIGNER_FAMILY = re.compile(r"eip155:(\*|[1-9][0-9]{0,18})")


def _validate_signer_family(value: object) -> str:
    if not isinstance(value, str) or not _SIGNER_FAMILY.fullmatch(value):
        fail("expected eip155:* or a CAIP-2 eip155 network as the signer key")
    return str.__str__(value)


# A signer map key: a CAIP-2 network or the family wildcard "eip155:*".
_SignerFamily = Annotated[str, PlainValidator(_validate_signer_family, json_schema_input_type=str)]
_SignerAddresses = Annotated[tuple[Address, ...], Field(max_length=16)]


class SupportedResponse(WireModel):
    """The facilitator's `/supported` answer. A v1-only answer has `kinds` alone."""

    kinds: Annotated[tuple[SupportedKind, ...], Field(max_length=64)]
    extensions: Annotated[tuple[ExtensionName, ...], Field(max_length=32)] = ()
    signers: Annotated[dict[_SignerFamily, _SignerAddresses], Field(max_length=16)] = Field(
        default_factory=dict
    )
