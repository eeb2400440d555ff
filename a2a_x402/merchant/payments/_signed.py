"""A signed payment of either transfer method, as the merchant reads it.

An `exact` payment is an EIP-3009 authorization of the token (`PaymentPayload`) or, for a token without
EIP-3009, a Permit2 witness transfer (`ExactPermit2PaymentPayload`); an `upto` payment is always a Permit2
one. Terms say which they ask for: `extra.assetTransferMethod: "permit2"` (or the `upto` scheme) asks for
Permit2, anything else for EIP-3009. Who signed and the nonce it spends are `signer_of`'s
(`facilitator.wire`), whose key keeps a Permit2 nonce apart from an EIP-3009 one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from a2a_x402.facilitator import PERMIT2_ADDRESS, RpcClient, authorization_used
from a2a_x402.facilitator.wire import (
    PERMIT2_NONCE_PREFIX,
    PaymentPayload,
    PaymentRequirements,
    Permit2Extra,
    Permit2PaymentPayload,
    WireError,
    parse_permit2_payment_payload,
)

__all__ = ["SignedPayment", "asks_permit2", "nonce_used", "pays", "payment_from_wire", "valid_before"]

SignedPayment: TypeAlias = PaymentPayload | Permit2PaymentPayload
"""An x402 v2 payment the merchant takes: EIP-3009, or a Permit2 witness transfer (`exact` or `upto`)."""

PERMIT2_METHOD = "permit2"
"""`extra.assetTransferMethod` of terms paid through Permit2."""


def payment_from_wire(document: Mapping[str, object]) -> SignedPayment:
    """A stored payment (its wire form, as the offer row keeps it), read by its shape.

    Raises:
        facilitator.wire.WireError: not a v2 payment of either method.
    """
    inner = document.get("payload")
    if isinstance(inner, Mapping) and "permit2Authorization" in inner:
        return parse_permit2_payment_payload(document)
    return PaymentPayload.from_wire(document)


def asks_permit2(requirements: PaymentRequirements) -> bool:
    """Whether `requirements` ask for a Permit2 witness transfer rather than an EIP-3009 authorization."""
    if requirements.scheme == "upto":
        return True
    try:
        return Permit2Extra.of(requirements).asset_transfer_method == PERMIT2_METHOD
    except WireError:
        return False  # not our terms' shape: such a payment pays nothing the merchant offered


def pays(payment: SignedPayment, requirements: PaymentRequirements) -> bool:
    """Whether `payment`'s signed transfer is of the method `requirements` ask for and pays them: their
    token (Permit2; an EIP-3009 authorization is its token's own), their amount (an `upto` one: the most it
    may settle) to their payTo."""
    if isinstance(payment, PaymentPayload):
        authorization = payment.payload.authorization
        return not asks_permit2(requirements) and (authorization.to, authorization.value) == (
            requirements.pay_to,
            requirements.amount,
        )
    permit = payment.payload.permit2_authorization
    return asks_permit2(requirements) and (
        permit.witness.to,
        permit.permitted.amount,
        permit.permitted.token,
    ) == (requirements.pay_to, requirements.amount, requirements.asset)


def valid_before(payment: SignedPayment) -> int:
    """The first unix time the chain refuses `payment` at: EIP-3009's `validBefore`, the second after
    Permit2's `deadline` (Permit2 still takes a block stamped at its deadline; a deadline beyond every
    block's time never expires)."""
    if isinstance(payment, PaymentPayload):
        return payment.payload.authorization.valid_before
    return payment.payload.permit2_authorization.deadline + 1


async def nonce_used(rpc: RpcClient, asset: str, payer: str, nonce: str) -> bool:
    """Whether the chain shows `payer`'s nonce used (or cancelled): `nonce` is a `signer_of` key, an
    EIP-3009 nonce of `asset` or a Permit2 one (`p2…`), whose state Permit2 itself holds.

    Raises:
        facilitator.ChainError: the node could not be read.
    """
    if nonce.startswith(PERMIT2_NONCE_PREFIX):
        return await authorization_used(
            rpc, PERMIT2_ADDRESS, payer, "0x" + nonce.removeprefix(PERMIT2_NONCE_PREFIX)
        )
    return await authorization_used(rpc, asset, payer, nonce)
