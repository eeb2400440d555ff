"""Building and reading the A2A messages and events that carry the extension's data."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import cast

import orjson
from a2a.types import Message, Part, Role, TaskState, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.struct_pb2 import Struct

from a2a_x402.extension import (
    EXTENSION_URI,
    FLAT_KEY_PREFIX,
    Dialect,
    PaymentData,
    X402PaymentPayload,
    decode,
    encode,
)
from a2a_x402.facilitator.wire import (
    EIP2612_GAS_SPONSORING,
    PaymentPayloadV1,
    PaymentRequired,
    PaymentRequiredV1,
    PaymentRequirements,
    SettleResponse,
    SettleResponseV1,
    chain_id_from_v1_network,
    payload_v1_to_v2,
    requirements_v2_to_v1,
    settle_response_to_v1,
)

from ._refusals import client_receipt
from ._signed import SignedPayment, asks_permit2, pays

__all__ = [
    "agent_status",
    "match_offer",
    "message_payment_data",
    "payload_hash",
    "receipt_for",
    "strip_signature",
    "terms_for",
]

_SIGNATURE = "signature"


def message_payment_data(message: Message | None, dialect: Dialect) -> PaymentData | None:
    """The extension data a client message carries in `dialect`, strictly decoded.

    Raises:
        a2a_x402.ExtensionMetadataError: the metadata is malformed or in the other dialect's form.
    """
    if message is None or not message.HasField("metadata"):
        return None
    # The Struct itself (a Mapping at run time, not in its stubs), not `MessageToDict` of all of it: only the
    # extension's own values are read, each converted once.
    return decode(cast("Mapping[str, object]", message.metadata), dialect)


def strip_signature(message: Message, dialect: Dialect) -> None:
    """Remove the signatures of the payment a client message carries, in place: the payment's own
    (`payload.payload.signature`, of either transfer method) and that of the EIP-2612 permit a Permit2
    payment may bring (`payload.extensions.eip2612GasSponsoring.info.signature`).

    A signed authorization is a bearer instrument until it is settled or expires: whoever reads it can
    present it. The message is stored in the task's history and shown to anyone who reads the task, so
    it is kept there without its signatures (specification §11); the merchant keeps the whole payment in
    its offer row. The payment was decoded (and checked) before: here the shape is known to be valid.
    """
    key = EXTENSION_URI if dialect is Dialect.V03 else FLAT_KEY_PREFIX + "payload"
    if not message.HasField("metadata") or key not in message.metadata:
        return
    payment: object = message.metadata[key]
    if dialect is Dialect.V03:
        payment = _member(payment, "payload")
    for path in (("payload",), ("extensions", EIP2612_GAS_SPONSORING, "info")):
        signed: object = payment
        for name in path:
            signed = _member(signed, name)
        if isinstance(signed, Struct) and _SIGNATURE in signed:
            del signed[_SIGNATURE]


def _member(value: object, name: str) -> object:
    return value[name] if isinstance(value, Struct) and name in value else None


def agent_status(
    task_id: str, context_id: str, state: TaskState, text: str, data: PaymentData, dialect: Dialect
) -> TaskStatusUpdateEvent:
    """A status update whose agent message says `text` and carries the extension `data`."""
    message = Message(
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        task_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )
    metadata = encode(data, dialect)
    message.metadata.update(metadata)
    if dialect is Dialect.V03:
        message.extensions.append(next(iter(metadata)))
    status = TaskStatus(state=state, message=message)
    status.timestamp.FromDatetime(datetime.now(UTC))
    return TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)


def terms_for(
    required: PaymentRequired, dialect: Dialect, *, mime_type: str, reason: str
) -> PaymentRequired | PaymentRequiredV1:
    """The offered terms as this dialect's clients expect them: x402 v1 for v0.2, v2 (unchanged) for v0.3
    and for terms paid through Permit2, which x402 v1 cannot carry.

    v1 payers need what v2 leaves optional: `error` at the top, which the v1 specification requires
    (`reason`, unless the terms carry their own), and `mimeType` in every entry (`mime_type`, unless
    `resource` names one). The x402 0.2 Python models, which the a2a-x402 package parses terms with,
    refuse terms that lack either.
    """
    if dialect is Dialect.V03 or any(asks_permit2(r) for r in required.accepts):
        # Permit2 payments (`exact` by Permit2, `upto`) exist in x402 v2 only: v0.2 carries their terms as v2.
        return required
    resource = required.resource
    if resource.mime_type is None:
        resource = resource.model_copy(update={"mime_type": mime_type})
    accepts = tuple(requirements_v2_to_v1(r, resource) for r in required.accepts)
    error = required.error if required.error is not None else reason
    return PaymentRequiredV1(x402_version=1, error=error, accepts=accepts)


def match_offer(
    payload: X402PaymentPayload, offered: PaymentRequired
) -> tuple[SignedPayment, PaymentRequirements] | None:
    """The v2 payment and the offered requirements it pays, or None if it pays none of them exactly.

    A v2 payment must carry one offered entry unchanged in `accepted`; a v1 payload names only its scheme
    and network. Either way the signed transfer must be of the method the terms ask for (EIP-3009 or
    Permit2) and pay the offered amount of the offered token to the offered payTo.
    """
    for requirements in offered.accepts:
        candidate: SignedPayment | None
        if isinstance(payload, PaymentPayloadV1):
            same_kind = payload.scheme == requirements.scheme
            same_chain = chain_id_from_v1_network(payload.network) == requirements.chain_id
            candidate = payload_v1_to_v2(payload, requirements) if same_kind and same_chain else None
        else:
            candidate = payload if payload.accepted == requirements else None
        if candidate is not None and pays(candidate, requirements):
            return candidate, requirements
    return None


def payload_hash(payload: SignedPayment) -> str:
    """A digest identifying one signed payment (for recognising a re-presented payload)."""
    return hashlib.sha256(orjson.dumps(payload.to_json_dict(), option=orjson.OPT_SORT_KEYS)).hexdigest()


def receipt_for(response: SettleResponse, submitted: X402PaymentPayload) -> SettleResponse | SettleResponseV1:
    """A settlement receipt in the x402 version the payer used, without the facilitator's free text."""
    response = client_receipt(response)
    if isinstance(submitted, PaymentPayloadV1):
        return settle_response_to_v1(response)
    return response
