"""Who signed a payment payload and which nonce it spends, for every kind of payload.

An EIP-3009 authorization (`exact`, x402 v1 or v2) spends a 32-byte nonce of its token; a Permit2 witness
transfer (`exact` by Permit2, or `upto`) spends a uint256 nonce of Permit2 itself, shared by every token
the payer moves through it. A record that keys payments by (payer, nonce) without naming the token must
keep the two apart, so the key of a Permit2 nonce has its own prefix: `p2` and 64 hex digits, beside
EIP-3009's `0x` and 64 hex digits. Both fit a 66-character column, and neither can ever equal the other.
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

from ._permit2 import ExactPermit2PaymentPayload, UptoPaymentPayload
from ._v1 import PaymentPayloadV1
from ._v2 import PaymentPayload

__all__ = [
    "PERMIT2_NONCE_PREFIX",
    "AnyPaymentPayload",
    "PaymentSigner",
    "payer_of",
    "permit2_nonce_key",
    "signer_of",
]

AnyPaymentPayload: TypeAlias = (
    PaymentPayload | PaymentPayloadV1 | ExactPermit2PaymentPayload | UptoPaymentPayload
)
"""A payment payload of any kind: EIP-3009 (x402 v1 or v2) or a Permit2 witness transfer (v2)."""

PERMIT2_NONCE_PREFIX = "p2"
"""What starts the key of a Permit2 nonce (`PaymentSigner.nonce`), where an EIP-3009 nonce starts `0x`."""


class PaymentSigner(NamedTuple):
    """Who signed a payment (`payer`, EIP-55) and the key of the nonce it spends (`nonce`): an EIP-3009
    nonce as lower-case `0x` hex, a Permit2 nonce as `p2` and its 64 lower-case hex digits."""

    payer: str
    nonce: str


def signer_of(payload: AnyPaymentPayload) -> PaymentSigner:
    """Who signed `payload` and the key of the nonce it spends (see `PaymentSigner`)."""
    if isinstance(payload, PaymentPayload | PaymentPayloadV1):
        authorization = payload.payload.authorization
        return PaymentSigner(authorization.from_address, authorization.nonce)
    permit = payload.payload.permit2_authorization
    return PaymentSigner(permit.from_address, permit2_nonce_key(permit.nonce))


def permit2_nonce_key(nonce: int) -> str:
    """The key of Permit2 nonce `nonce` (see `PaymentSigner`), as the ledger and the offers store it."""
    return f"{PERMIT2_NONCE_PREFIX}{nonce:064x}"


def payer_of(payload: AnyPaymentPayload) -> str:
    """Who signed `payload`: its authorization's `from`."""
    return signer_of(payload).payer
