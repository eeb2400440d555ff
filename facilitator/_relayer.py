"""The relayer: the facilitator's own account that pays gas to submit payers' authorizations.

Transactions from one account must use consecutive nonces, and a nonce that is taken but never reaches
the node leaves a gap that stalls every later transaction. So nonces are allocated, signed and sent under
one lock, and any doubt about what the node holds (an error reply, a lost answer) is settled by asking the
node for its pending count before the next allocation. Receipt waits happen outside the lock, so sends
pipeline while earlier transactions are still being mined.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from eth_account import Account
from eth_account.signers.local import LocalAccount

from ._errors import ChainUnavailableError, RpcError
from ._rpc import RpcCall, RpcClient

__all__ = ["Relayer", "SentTransaction"]

logger = logging.getLogger(__name__)

_FEE_TTL_S = 1.0
_SEND_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class SentTransaction:
    """A transaction the node accepted into its pool."""

    tx_hash: str
    raw: str
    nonce: int
    sender: str


class Relayer:
    """Signs and submits EIP-1559 transactions from one key with gap-free nonces."""

    def __init__(self, rpc: RpcClient, key: str, chain_id: int, *, priority_fee_wei: int | None = None):
        self._rpc = rpc
        self._account: LocalAccount = Account.from_key(key)
        self._chain_id = chain_id
        self._priority_fee_wei = priority_fee_wei
        self._lock = asyncio.Lock()
        self._next_nonce: int | None = None
        self._fees: tuple[float, int, int] | None = None  # (fetched_at, max_fee, priority_fee)

    @property
    def address(self) -> str:
        """The relayer's checksummed address."""
        return self._account.address

    async def send(self, to: str, data: str, gas: int) -> SentTransaction:
        """Sign and submit a call to `to` with `data`; return once the node has accepted it.

        Raises RpcError when the node refuses the transaction (nothing was submitted) and
        ChainUnavailableError when the node cannot be reached (nothing was submitted either: a lost answer
        is resolved by asking the node whether it holds our nonce).
        """
        async with self._lock:
            for attempt in range(_SEND_ATTEMPTS):
                nonce = await self._nonce()
                max_fee, priority_fee = await self._fee_caps()
                signed = self._account.sign_transaction(
                    {
                        "type": 2,
                        "chainId": self._chain_id,
                        "nonce": nonce,
                        "to": to,
                        "data": data,
                        "gas": gas,
                        "maxFeePerGas": max_fee,
                        "maxPriorityFeePerGas": priority_fee,
                        "value": 0,
                    }
                )
                raw = "0x" + signed.raw_transaction.hex()
                tx_hash = "0x" + signed.hash.hex()
                try:
                    await self._rpc.call("eth_sendRawTransaction", raw)
                except RpcError as exc:
                    if _already_known(exc):
                        break
                    self._next_nonce = None
                    if _stale_nonce_or_fee(exc) and attempt + 1 < _SEND_ATTEMPTS:
                        self._fees = None
                        logger.info("relayer resync after %s (nonce %d)", exc.message, nonce)
                        continue
                    raise
                except ChainUnavailableError:
                    if await self._node_holds(nonce):
                        break
                    raise
                break
            self._next_nonce = nonce + 1
            return SentTransaction(tx_hash=tx_hash, raw=raw, nonce=nonce, sender=self.address)

    async def rebroadcast(self, raw: str) -> None:
        """Send an already-signed transaction again (after it was dropped from the pool)."""
        try:
            await self._rpc.call("eth_sendRawTransaction", raw)
        except RpcError as exc:
            if not _already_known(exc):
                raise

    async def _nonce(self) -> int:
        if self._next_nonce is None:
            self._next_nonce = int(await self._rpc.call("eth_getTransactionCount", self.address, "pending"), 16)
        return self._next_nonce

    async def _node_holds(self, nonce: int) -> bool:
        """Whether the node has a transaction of ours with `nonce` (after a send whose answer was lost)."""
        self._next_nonce = None
        try:
            return await self._nonce() > nonce
        except ChainUnavailableError:
            return False

    async def _fee_caps(self) -> tuple[int, int]:
        now = time.monotonic()
        if self._fees is None or now - self._fees[0] > _FEE_TTL_S:
            block, tip = await self._rpc.batch(
                [RpcCall("eth_getBlockByNumber", ["latest", False]), RpcCall("eth_maxPriorityFeePerGas", [])]
            )
            if isinstance(block, RpcError):
                raise block
            base_fee = int(block.get("baseFeePerGas", "0x0"), 16)
            priority = self._priority_fee_wei
            if priority is None:
                priority = int(tip, 16) if isinstance(tip, str) else 1_000_000_000
            # Twice the base fee survives six consecutive full blocks of +12.5% each.
            self._fees = (now, 2 * base_fee + priority, priority)
        return self._fees[1], self._fees[2]


def _already_known(exc: RpcError) -> bool:
    text = exc.message.lower()
    return "already known" in text or "already imported" in text or "known transaction" in text


def _stale_nonce_or_fee(exc: RpcError) -> bool:
    text = exc.message.lower()
    return any(
        phrase in text
        for phrase in ("nonce too low", "nonce too high", "replacement transaction underpriced", "less than block base fee")
    )
