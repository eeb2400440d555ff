"""Reading a verify or settle request: x402 documents in, the authorization and terms to check out.

Only the checks that need neither the chain nor the clock happen here (scheme, network, `accepted` equal to
the requirements, the token's EIP-712 domain named; for a Permit2 payment, `_permit2_rules.permit2_terms`),
so a settle can find an earlier claim for the same authorization before anything time-dependent could
refuse it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import orjson
from pydantic.alias_generators import to_camel

from ._errors import InvalidIdempotencyKeyError, PaymentInvalidError
from ._permit2_rules import Permit2Terms, permit2_terms
from ._terms import Terms
from ._token import Authorization
from .wire import (
    ExactPermit2PaymentPayload,
    PaymentPayload,
    PaymentRequirements,
    Reason,
    UptoPaymentPayload,
)

__all__ = [
    "PaymentRequest",
    "Permit2Request",
    "idempotency_key_of",
    "namespaced_key",
    "read_payment",
    "read_permit2_payment",
]

_PAYMENT_IDENTIFIER = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


@dataclass(frozen=True, slots=True)
class PaymentRequest:
    """One payment as the service works with it."""

    authorization: Authorization
    terms: Terms
    # sha256 of the canonical payload and requirements: what an idempotency key is bound to.
    payload_hash: str


def read_payment(payload: PaymentPayload, requirements: PaymentRequirements, network: str) -> PaymentRequest:
    """The payment of a request to a facilitator serving `network`.

    Raises:
        PaymentInvalidError: wrong scheme or network, `accepted` differs from the requirements, or the
            requirements do not name the token's EIP-712 domain.
    """
    if requirements.scheme != "exact" or payload.accepted.scheme != "exact":
        raise PaymentInvalidError(Reason.UNSUPPORTED_SCHEME, "only the exact scheme is supported")
    if requirements.network != network:
        raise PaymentInvalidError(Reason.INVALID_NETWORK, f"this facilitator settles on {network} only")
    if payload.accepted.network != requirements.network:
        raise PaymentInvalidError(Reason.NETWORK_MISMATCH, "the payment was made for another network")
    if payload.accepted != requirements:
        raise _accepted_mismatch(payload.accepted, requirements)
    extra = requirements.extra or {}
    name, version = extra.get("name"), extra.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        raise PaymentInvalidError(
            Reason.MISSING_EIP712_DOMAIN, "requirements.extra needs the token's name and version"
        )
    wire = payload.payload.authorization
    authorization = Authorization(
        from_=wire.from_address,
        to=wire.to,
        value=wire.value,
        valid_after=wire.valid_after,
        valid_before=wire.valid_before,
        nonce=bytes.fromhex(wire.nonce[2:]),
        signature=bytes.fromhex(payload.payload.signature[2:]),
    )
    terms = Terms(
        network=requirements.network,
        chain_id=requirements.chain_id,
        asset=requirements.asset,
        pay_to=requirements.pay_to,
        amount=requirements.amount,
        token_name=name,
        token_version=version,
    )
    return PaymentRequest(
        authorization=authorization, terms=terms, payload_hash=_payload_hash(payload, requirements)
    )


@dataclass(frozen=True, slots=True)
class Permit2Request:
    """One Permit2 payment (`exact` by Permit2, or `upto`) as the service works with it."""

    payment: ExactPermit2PaymentPayload | UptoPaymentPayload
    terms: Permit2Terms
    # As `PaymentRequest.payload_hash`.
    payload_hash: str


def read_permit2_payment(
    payment: ExactPermit2PaymentPayload | UptoPaymentPayload,
    requirements: PaymentRequirements,
    network: str,
    *,
    settling: bool = False,
) -> Permit2Request:
    """The Permit2 payment of a verify (or, `settling`, a settle) request to a facilitator serving `network`.

    Raises:
        PaymentInvalidError: another network than this facilitator's, or terms `permit2_terms` refuses.
    """
    if requirements.network != network:
        raise PaymentInvalidError(Reason.INVALID_NETWORK, f"this facilitator settles on {network} only")
    terms = permit2_terms(payment, requirements, settling=settling)
    return Permit2Request(payment=payment, terms=terms, payload_hash=_payload_hash(payment, requirements))


def _payload_hash(
    payload: PaymentPayload | ExactPermit2PaymentPayload | UptoPaymentPayload,
    requirements: PaymentRequirements,
) -> str:
    """sha256 of the canonical payload and requirements."""
    document = {"payload": payload.to_json_dict(), "requirements": requirements.to_json_dict()}
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


# The fields of `accepted` whose difference from the requirements has an x402 code of its own; any other
# difference (asset, maxTimeoutSeconds, extra) is an invalid payload. Scheme and network are checked first.
_ACCEPTED_FIELD_REASONS = {
    "amount": Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH,
    "pay_to": Reason.INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH,
}


def _accepted_mismatch(accepted: PaymentRequirements, required: PaymentRequirements) -> PaymentInvalidError:
    """The refusal of a payload that accepted other terms than the requirements, naming the fields."""
    fields = PaymentRequirements.model_fields
    differing = [name for name in fields if getattr(accepted, name) != getattr(required, name)]
    reason = next(
        (_ACCEPTED_FIELD_REASONS[name] for name in differing if name in _ACCEPTED_FIELD_REASONS),
        Reason.INVALID_PAYLOAD,
    )
    named = ", ".join(to_camel(name) for name in differing)
    return PaymentInvalidError(reason, f"paymentPayload.accepted differs from the requirements in: {named}")


def idempotency_key_of(
    explicit: str | None, payload: PaymentPayload | ExactPermit2PaymentPayload | UptoPaymentPayload
) -> str | None:
    """The caller's idempotency key, else the x402 `payment-identifier` extension's id, else None.

    Raises:
        InvalidIdempotencyKeyError: `explicit` is not 1 to 255 printable ASCII characters.
    """
    if explicit is not None:
        if not _IDEMPOTENCY_KEY.match(explicit):
            raise InvalidIdempotencyKeyError("an idempotency key is 1 to 255 printable ASCII characters")
        return explicit
    extension = (payload.extensions or {}).get("payment-identifier")
    info = extension.get("info") if isinstance(extension, dict) else None
    identifier = info.get("id") if isinstance(info, dict) else None
    if isinstance(identifier, str) and _PAYMENT_IDENTIFIER.match(identifier):
        return "payment-identifier:" + identifier
    return None


def namespaced_key(namespace: str, key: str) -> str:
    """`key` within `namespace`, as stored: the key is hashed, so the result fits the claim's column (255)
    whatever the namespace, and equal keys of different namespaces never meet."""
    return f"{namespace}:{hashlib.sha256(key.encode()).hexdigest()}"
