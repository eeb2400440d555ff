"""The answers to `/verify` and `/settle` requests the service refuses before any check of the payment.

A body that is not JSON, not an x402 request, or breaks the wire form (a 31-byte nonce, a number where a
decimal string belongs, an unknown or missing field), and a settle whose idempotency key is unusable, still
get the operation's own response: `{isValid: false, invalidReason, invalidMessage, payer?}` or
`{success: false, errorReason, errorMessage, transaction: "", network, payer?}`, so that any x402 client
reads the reason where it reads every other one. The reason is the parser's (`invalid_payload`,
`invalid_payment_requirements`, `invalid_x402_version`, `invalid_network`); the message names the field.
The answer takes the request's x402 version when the body declares 1, else 2; `payer` is the
authorization's (or Permit2 authorization's) `from` when that much of the body is a valid address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from .wire import (
    Reason,
    SettleResponse,
    VerifyResponse,
    WireError,
    settle_response_to_v1,
    verify_response_to_v1,
)

__all__ = ["settle_refusal", "verify_refusal"]

_Answer = TypeVar("_Answer", VerifyResponse, SettleResponse)


def _is_v1(data: object) -> bool:
    version = data.get("x402Version") if isinstance(data, dict) else None
    return version == 1 and not isinstance(version, bool)


def _claimed_payer(data: object) -> object:
    """`paymentPayload.payload.authorization.from` (or `.permit2Authorization.from`, of a Permit2 payment)
    of a decoded body, whatever it is, or None."""
    value = data
    for name in ("paymentPayload", "payload"):
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    if not isinstance(value, dict):
        return None
    signed = value.get("authorization", value.get("permit2Authorization"))
    return signed.get("from") if isinstance(signed, dict) else None


def _answer(build: Callable[[str | None], _Answer], data: object) -> _Answer:
    """`build(payer)` with the body's payer when it is a valid address, else `build(None)`."""
    payer = _claimed_payer(data)
    if isinstance(payer, str):
        try:
            return build(payer)
        except ValidationError:
            pass  # not an EIP-55 address: the answer names no payer
    return build(None)


def verify_refusal(data: object, reason: Reason, message: str) -> dict[str, Any]:
    """The `/verify` answer (wire form) refusing the decoded body `data` (None when it is not JSON)."""

    def build(payer: str | None) -> VerifyResponse:
        return VerifyResponse(is_valid=False, invalid_reason=reason, invalid_message=message, payer=payer)

    answer = _answer(build, data)
    return (verify_response_to_v1(answer) if _is_v1(data) else answer).to_json_dict()


def settle_refusal(data: object, reason: Reason, message: str, network: str) -> dict[str, Any]:
    """The `/settle` answer (wire form) refusing `data`; `network` is the one this facilitator settles on."""

    def build(payer: str | None) -> SettleResponse:
        return SettleResponse(
            success=False,
            error_reason=reason,
            error_message=message,
            payer=payer,
            transaction="",
            network=network,
        )

    answer = _answer(build, data)
    if _is_v1(data):
        try:
            return settle_response_to_v1(answer).to_json_dict()
        except WireError:
            pass  # the chain has no v1 name: answer in the v2 form, which names it
    return answer.to_json_dict()
