"""Errors raised by the dev chain tooling, each with a stable ``code``.

* DevchainError
  + AnvilNotFoundError      -- no anvil binary (its message says how to get one)
  + AnvilStartError         -- its port was taken, anvil exited or did not answer in time
  + RpcError                -- the node answered a JSON-RPC call with an error
  + TransactionFailedError  -- a transaction was mined with status 0
"""

from __future__ import annotations

from typing import Any

from eth_abi.abi import decode

__all__ = ["AnvilNotFoundError", "AnvilStartError", "DevchainError", "RpcError", "TransactionFailedError"]

# Selector of Solidity's `Error(string)`, the payload of every `require(..., "reason")`.
_ERROR_STRING_SELECTOR = bytes.fromhex("08c379a0")


class DevchainError(Exception):
    """Root of the dev chain errors."""

    code = "devchain_error"


class AnvilNotFoundError(DevchainError):
    """No anvil binary: not in X402_ANVIL_BIN, the checkout's node_modules, nor on PATH."""

    code = "anvil_not_found"


class AnvilStartError(DevchainError):
    """anvil's port was taken, or anvil exited during start-up or did not answer ``eth_chainId`` in time."""

    code = "anvil_start_failed"


class RpcError(DevchainError):
    """A JSON-RPC error object returned by the node."""

    code = "rpc_error"

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        self.method = method
        self.rpc_code: int = error.get("code", 0)
        self.rpc_message: str = error.get("message", "")
        self.data: Any = error.get("data")
        super().__init__(f"{method}: {self.rpc_message} (code {self.rpc_code})")

    @property
    def revert_reason(self) -> str | None:
        """The ``require`` message of a reverted call, or None if the revert carried no string."""
        if not isinstance(self.data, str) or not self.data.startswith("0x"):
            return None
        payload = bytes.fromhex(self.data[2:])
        if payload[:4] != _ERROR_STRING_SELECTOR:
            return None
        (reason,) = decode(["string"], payload[4:])
        return str(reason)


class TransactionFailedError(DevchainError):
    """A transaction was mined but reverted."""

    code = "transaction_failed"

    def __init__(self, tx_hash: str, receipt: dict[str, Any]) -> None:
        self.tx_hash = tx_hash
        self.receipt = receipt
        super().__init__(f"transaction {tx_hash} reverted in block {int(receipt['blockNumber'], 16)}")
