"""Facilitator exceptions, each with a stable `code`.

    FacilitatorError                            facilitator_error
    ├── ChainError                              chain_error
    │   ├── ChainUnavailableError               chain_unavailable: node unreachable or answering garbage
    │   ├── RpcError                            rpc_error: a JSON-RPC error reply (reverts included)
    │   └── ChainMismatchError                  chain_mismatch: eth_chainId is not the configured network's
    ├── PaymentInvalidError                     the x402 reason code of the failed check
    ├── IdempotencyConflictError                idempotency_key_conflict: a key reused for another payment
    └── InvalidIdempotencyKeyError (ValueError) invalid_idempotency_key: not 1-255 printable ASCII characters

A payment that fails a check is not an error of the service: public entry points turn
PaymentInvalidError into `isValid: false` / `success: false` answers with its reason. The codes of the
other exceptions are for logs and callers in process; none is an x402 reason: over HTTP the two
idempotency errors are settle answers with `invalid_payload` (409 and 400, see `_app`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ChainError",
    "ChainMismatchError",
    "ChainUnavailableError",
    "FacilitatorError",
    "IdempotencyConflictError",
    "InvalidIdempotencyKeyError",
    "PaymentInvalidError",
    "RpcError",
    "RpcTimeoutError",
]

_ERROR_STRING_SELECTOR = "0x08c379a0"  # Error(string)


class FacilitatorError(Exception):
    """Root of every exception the facilitator raises on purpose."""

    code: str = "facilitator_error"


class ChainError(FacilitatorError):
    """Something went wrong talking to the chain."""

    code = "chain_error"


class ChainUnavailableError(ChainError):
    """The RPC node is unreachable, timed out, or answered something that is not JSON-RPC."""

    code = "chain_unavailable"


class RpcTimeoutError(ChainUnavailableError):
    """The node took the request and gave no answer in time: it may still act on it (a send may be mined)."""

    code = "rpc_timeout"


class FacilitatorAnswerError(ChainUnavailableError):
    """A remote facilitator answered, but not with an x402 answer (a 5xx, a body of another shape): what
    became of the payment is for its claim (`settlement_status`) to say."""

    code = "facilitator_answer"


class ChainMismatchError(ChainError):
    """The RPC node serves another chain than the configured CAIP-2 network."""

    code = "chain_mismatch"


class RpcError(ChainError):
    """A JSON-RPC error reply, e.g. a reverted eth_call or a rejected transaction."""

    code = "rpc_error"

    def __init__(self, rpc_code: int, message: str, data: Any):
        super().__init__(f"RPC error {rpc_code}: {message}")
        self.rpc_code = rpc_code
        self.message = message
        self.data = data

    @property
    def revert_reason(self) -> str | None:
        """The `Error(string)` reason of a revert, from the ABI data or the node's message."""
        if isinstance(self.data, str) and self.data.startswith(_ERROR_STRING_SELECTOR):
            # Imported here: these types are the mistakes every command answers, and must not cost its
            # start-up the ABI codec (and its grammar parser) that only a revert's reason needs.
            from eth_abi.abi import decode as abi_decode
            from eth_abi.exceptions import DecodingError

            try:
                (reason,) = abi_decode(["string"], bytes.fromhex(self.data[10:]))
            except (DecodingError, ValueError):
                reason = None  # malformed revert data: fall back to the node's message
            if reason is not None:
                return str(reason)
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
        # The x402 reason is the stable code of a payment failure.
        self.code = reason


class IdempotencyConflictError(FacilitatorError):
    """The idempotency key was first used with a different payment."""

    code = "idempotency_key_conflict"


class InvalidIdempotencyKeyError(FacilitatorError, ValueError):
    """The idempotency key is not 1 to 255 printable ASCII characters."""

    code = "invalid_idempotency_key"
