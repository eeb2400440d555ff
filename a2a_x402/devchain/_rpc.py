"""Minimal synchronous JSON-RPC client for the dev chain: calls, locally signed transactions, receipts.

This is tooling for the CLI and tests, not server code, so it blocks. Transactions are signed with
eth-account and sent raw; a receipt is polled at a few milliseconds because anvil automines almost
at once, yet a receipt is not guaranteed to exist right after ``eth_sendRawTransaction``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx
from eth_abi.abi import encode
from eth_account import Account
from eth_utils.abi import function_signature_to_4byte_selector

from ._errors import RpcError, TransactionFailedError

__all__ = ["RpcClient", "encode_call"]


def encode_call(signature: str, args: Sequence[Any] = ()) -> bytes:
    """ABI-encode a call from a canonical signature such as ``"mint(address,uint256)"``.

    Only flat argument lists are supported, which is all the dev chain needs.
    """
    inner = signature[signature.index("(") + 1 : -1]
    types = inner.split(",") if inner else []
    return function_signature_to_4byte_selector(signature) + encode(types, list(args))


class RpcClient:
    """JSON-RPC over one pooled HTTP connection to a node."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        self.url = url
        self._http = httpx.Client(timeout=timeout_s)
        self._ids = itertools.count(1)

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def call(self, method: str, params: Sequence[Any] = ()) -> Any:
        """Call ``method`` and return its ``result``.

        Raises:
            RpcError: the node answered with a JSON-RPC error (e.g. a revert).
            httpx.HTTPError: the node could not be reached.
        """
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        response = self._http.post(self.url, json=request)
        response.raise_for_status()
        body = response.json()
        if "error" in body:
            raise RpcError(method, body["error"])
        return body["result"]

    def eth_call(self, to: str, data: bytes) -> bytes:
        """Run a read-only call against the latest block and return the raw return data."""
        result: str = self.call("eth_call", [{"to": to, "data": "0x" + data.hex()}, "latest"])
        return bytes.fromhex(result[2:])

    def send_transaction(
        self, key: str, *, to: str | None, data: bytes, gas: int | None = None, value_wei: int = 0
    ) -> str:
        """Sign an EIP-1559 transaction with ``key`` and broadcast it; ``to=None`` deploys.

        Gas is estimated when not given, so a call that would revert raises ``RpcError`` here.

        Returns:
            The transaction hash as ``0x`` hex.
        """
        sender = Account.from_key(key).address
        tx: dict[str, Any] = {"from": sender, "data": "0x" + data.hex(), "value": hex(value_wei)}
        if to is not None:
            tx["to"] = to
        if gas is None:
            gas = int(self.call("eth_estimateGas", [tx]), 16)
        pending = self.call("eth_getBlockByNumber", ["pending", False])
        tip_wei = int(self.call("eth_maxPriorityFeePerGas"), 16)
        unsigned: dict[str, Any] = {
            "type": 2,
            "chainId": int(self.call("eth_chainId"), 16),
            "nonce": int(self.call("eth_getTransactionCount", [sender, "pending"]), 16),
            "value": value_wei,
            "data": data,
            "gas": gas,
            # Twice the base fee survives a few full blocks of base-fee growth.
            "maxFeePerGas": 2 * int(pending["baseFeePerGas"], 16) + tip_wei,
            "maxPriorityFeePerGas": tip_wei,
        }
        if to is not None:
            unsigned["to"] = to
        signed = Account.sign_transaction(unsigned, key)
        tx_hash: str = self.call("eth_sendRawTransaction", [signed.raw_transaction.to_0x_hex()])
        return tx_hash

    def wait_for_receipt(
        self, tx_hash: str, *, timeout_s: float = 10.0, poll_s: float = 0.003
    ) -> dict[str, Any]:
        """Poll until the transaction is mined and return its receipt.

        Raises:
            TimeoutError: no receipt within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while (receipt := self.call("eth_getTransactionReceipt", [tx_hash])) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no receipt for {tx_hash} after {timeout_s} s")
            time.sleep(poll_s)
        result: dict[str, Any] = receipt
        return result

    def transact(
        self, key: str, *, to: str | None, data: bytes, gas: int | None = None, value_wei: int = 0
    ) -> dict[str, Any]:
        """Send a transaction, wait for it and return the receipt of a successful one.

        Raises:
            RpcError: the node refused the transaction or its gas estimate reverted.
            TransactionFailedError: the transaction was mined with status 0.
        """
        tx_hash = self.send_transaction(key, to=to, data=data, gas=gas, value_wei=value_wei)
        receipt = self.wait_for_receipt(tx_hash)
        if int(receipt["status"], 16) != 1:
            raise TransactionFailedError(tx_hash, receipt)
        return receipt
