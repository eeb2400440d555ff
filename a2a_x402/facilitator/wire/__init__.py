"""x402 wire types: v2 and v1 documents, strict parsing, and conversions between the versions.

Beside the EIP-3009 payload of `exact`, the v2 payloads of a Permit2 witness transfer (`exact` with
`assetTransferMethod: "permit2"`, and `upto`) have their own documents, `/verify` and `/settle` bodies and
parse entry point; `signer_of` says who signed a payload of any kind and which nonce it spends.

Pure data, no I/O. Untrusted input goes through the `parse_*` functions or `Model.from_wire`,
which accept exactly the wire form (camelCase names, checksummed addresses, uint256 decimal
strings, 32-byte nonces, known `x402Version`s, bounded sizes) and raise only `WireError`, whose
`reason` is the x402 code to answer with. Models are frozen; `to_json_dict()` gives the wire form.
"""

from __future__ import annotations

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
from ._base import WireModel
from ._convert import (
    payload_v1_to_v2,
    request_to_v2,
    requirements_v1_to_v2,
    requirements_v2_to_v1,
    resource_info_from_v1,
    settle_response_to_v1,
    verify_response_to_v1,
)
from ._errors import WireError
from ._networks import (
    MAX_CHAIN_ID,
    V1_NETWORK_CHAIN_IDS,
    Caip2Network,
    V1Network,
    caip2_from_chain_id,
    chain_id_from_caip2,
    chain_id_from_v1_network,
    v1_network_from_chain_id,
)
from ._parse import (
    parse_payment_payload,
    parse_payment_required,
    parse_payment_requirements,
    parse_settle_request,
    parse_verify_request,
)
from ._permit2 import (
    EIP2612_GAS_SPONSORING,
    ExactPermit2Authorization,
    ExactPermit2Payload,
    ExactPermit2PaymentPayload,
    ExactPermit2Witness,
    Permit2Extra,
    Permit2PaymentPayload,
    Permit2TokenPermissions,
    UptoPaymentPayload,
    UptoPermit2Authorization,
    UptoPermit2Payload,
    UptoPermit2Witness,
    parse_permit2_payment_payload,
)
from ._primitives import (
    MAX_SIGNATURE_BYTES,
    Address,
    Bytes32,
    Signature,
    TxHash,
    Uint256,
    UnixTime,
    checksum_address,
)
from ._reasons import Reason
from ._signer import (
    PERMIT2_NONCE_PREFIX,
    AnyPaymentPayload,
    PaymentSigner,
    payer_of,
    permit2_nonce_key,
    signer_of,
)
from ._v1 import (
    PaymentPayloadV1,
    PaymentRequiredV1,
    PaymentRequirementsV1,
    SettleResponseV1,
    VerifyResponseV1,
)
from ._v2 import (
    ExactEvmAuthorization,
    ExactEvmPayload,
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    ResourceInfo,
    SettleResponse,
    SupportedKind,
    SupportedResponse,
    VerifyResponse,
)

__all__ = [
    "EIP2612_GAS_SPONSORING",
    "MAX_CHAIN_ID",
    "MAX_SIGNATURE_BYTES",
    "PERMIT2_NONCE_PREFIX",
    "V1_NETWORK_CHAIN_IDS",
    "Address",
    "AnyPaymentPayload",
    "Bytes32",
    "Caip2Network",
    "ExactEvmAuthorization",
    "ExactEvmPayload",
    "ExactPermit2Authorization",
    "ExactPermit2Payload",
    "ExactPermit2PaymentPayload",
    "ExactPermit2SettleRequest",
    "ExactPermit2VerifyRequest",
    "ExactPermit2Witness",
    "PaymentPayload",
    "PaymentPayloadV1",
    "PaymentRequired",
    "PaymentRequiredV1",
    "PaymentRequirements",
    "PaymentRequirementsV1",
    "PaymentSigner",
    "Permit2Extra",
    "Permit2PaymentPayload",
    "Permit2TokenPermissions",
    "Reason",
    "ResourceInfo",
    "SettleRequest",
    "SettleRequestV1",
    "SettleResponse",
    "SettleResponseV1",
    "Signature",
    "SupportedKind",
    "SupportedResponse",
    "TxHash",
    "Uint256",
    "UnixTime",
    "UptoPaymentPayload",
    "UptoPermit2Authorization",
    "UptoPermit2Payload",
    "UptoPermit2Witness",
    "UptoSettleRequest",
    "UptoVerifyRequest",
    "V1Network",
    "VerifyRequest",
    "VerifyRequestV1",
    "VerifyResponse",
    "VerifyResponseV1",
    "WireError",
    "WireModel",
    "caip2_from_chain_id",
    "chain_id_from_caip2",
    "chain_id_from_v1_network",
    "checksum_address",
    "parse_payment_payload",
    "parse_payment_required",
    "parse_payment_requirements",
    "parse_permit2_payment_payload",
    "parse_settle_request",
    "parse_verify_request",
    "payer_of",
    "payload_v1_to_v2",
    "permit2_nonce_key",
    "request_to_v2",
    "requirements_v1_to_v2",
    "requirements_v2_to_v1",
    "resource_info_from_v1",
    "settle_response_to_v1",
    "signer_of",
    "v1_network_from_chain_id",
    "verify_response_to_v1",
]
