"""Facilitator exceptions.

    FacilitatorError
    ├── ChainError
    │   ├── ChainUnavailableError   the RPC node could not be reached or answered garbage
    │   ├── RpcError                the node answered a call with a JSON-RPC error (reverts included)
    │   └── ChainMismatchError      the node's eth_chainId is not the configured network's
    ├── PaymentInvalidError         a payment failed a check; carries the x402 reason code
    ├── IdempotencyConflictError    an idempotency key was reused for a different payment
    └── InvalidIdempotencyKeyError  an idempotency key that is not 1-255 printable ASCII characters

A payment that fails a check is not an error of the service: public entry points turn
PaymentInvalidError into `isValid: false` / `success: false` answers with its reason.
"""

from __future__ import annotations

from typing import Any

from eth_abi import decode as abi_decode

__all__ = [
    "ChainError",
    "ChainMismatchError",
    "ChainUnavailableError",
    "FacilitatorError",
    "IdempotencyConflictError",
    "InvalidIdempotencyKeyError",
    "PaymentInvalidError",
    "RpcError",
]

_ERROR_STRING_SELECTOR = "0x08c379a0"  # Error(string)


class FacilitatorError(Exception):
    """Root of every exception the facilitator raises on purpose."""


class ChainError(FacilitatorError):
    """Something went wrong talking to the chain."""


class ChainUnavailableError(ChainError):
    """The RPC node is unreachable, timed out, or answered something that is not JSON-RPC."""


class ChainMismatchError(ChainError):
    """The RPC node serves another chain than the configured CAIP-2 network."""


class RpcError(ChainError):
    """A JSON-RPC error reply, e.g. a reverted eth_call or a rejected transaction."""

    def __init__(self, code: int, message: str, data: Any):
        super().__init__(f"RPC error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    @property
    def revert_reason(self) -> str | None:
        """The `Error(string)` reason of a revert, from the ABI data or the node's message."""
        if isinstance(self.data, str) and self.data.startswith(_ERROR_STRING_SELECTOR):
            try:
                (reason,) = abi_decode(["string"], bytes.fromhex(self.data[10:]))
                return str(reason)
            except Exception:  # noqa: BLE001 - malformed revert data falls back to the message
                pass
        prefix = "execution reverted: "
        if self.message.startswith(prefix):
            return self.message[len(prefix) :]
        return None


class PaymentInvalidError(FacilitatorError):
    """A payment failed verification or settlement for a reason the payer can act on."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class IdempotencyConflictError(FacilitatorError):
    """The idempotency key was first used with a different payment."""


class InvalidIdempotencyKeyError(FacilitatorError, ValueError):
    """The idempotency key is not 1 to 255 printable ASCII characters."""
