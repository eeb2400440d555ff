"""The relayer: the facilitator's own account that pays gas to submit payers' authorizations.

Transactions from one account must use consecutive nonces, and a nonce that is taken but never reaches
the node leaves a gap that stalls every later transaction. So nonces are allocated, signed and sent under
one lock. After an error reply the next allocation asks the node for its pending count; after a lost answer
the node is asked whether it holds the transaction's hash. Receipt waits happen outside the lock, so sends
pipeline while earlier transactions are still being mined.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import coincurve
from eth_account import Account

from ._errors import ChainUnavailableError, RpcError
from ._rpc import RpcCall, RpcClient
from ._txsign import sign_eip1559

__all__ = ["BroadcastUncertainError", "Relayer", "SentTransaction"]

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
    max_fee_per_gas: int = 0
    max_priority_fee_per_gas: int = 0


class BroadcastUncertainError(ChainUnavailableError):
    """The node went away while taking a transaction: it may hold it (and mine it) or not.

    Such a transaction must be treated as broadcast — waited for, and revived if it never shows up —
    never as "nothing was sent", or a payer could be charged for a settlement reported as failed.
    """

    def __init__(self, sent: SentTransaction, detail: str):
        super().__init__(f"the node became unreachable while taking {sent.tx_hash}: {detail}")
        self.sent = sent


class Relayer:
    """Signs and submits EIP-1559 transactions from one key with gap-free nonces."""

    def __init__(
        self,
        rpc: RpcClient,
        key: str,
        chain_id: int,
        *,
        priority_fee_wei: int | None = None,
        max_fee_per_gas: int | None = None,
    ):
        self._rpc = rpc
        self._key = coincurve.PrivateKey(bytes.fromhex(key.removeprefix("0x")))
        self._address: str = Account.from_key(key).address
        self._chain_id = chain_id
        self._priority_fee_wei = priority_fee_wei
        self._max_fee_per_gas = max_fee_per_gas
        self._lock = asyncio.Lock()
        self._next_nonce: int | None = None
        self._fees: tuple[float, int, int] | None = None  # (fetched_at, max_fee, priority_fee)

    @property
    def address(self) -> str:
        """The relayer's checksummed address."""
        return self._address

    @property
    def next_nonce(self) -> int | None:
        """The nonce the next transaction will carry, if known without asking the node."""
        return self._next_nonce

    async def send(self, to: str, data: str, gas: int) -> SentTransaction:
        """Sign and submit a call to `to` with `data`; return once the node has accepted it.

        Raises:
            RpcError: the node refused the transaction; nothing was submitted.
            ChainUnavailableError: the node could not be reached, and it does not hold the transaction (a lost
                answer is resolved by asking the node for the transaction's hash).
        """
        async with self._lock:
            attempt = 0
            while True:
                attempt += 1
                nonce = await self._nonce()
                max_fee, priority_fee = await self._fee_caps()
                sent = self._sign(nonce, max_fee, priority_fee, to=to, data=data, gas=gas)
                try:
                    await self._rpc.call("eth_sendRawTransaction", sent.raw)
                except RpcError as exc:
                    if not _already_known(exc):
                        # Whatever the node holds now, the next allocation asks it.
                        self._next_nonce = None
                        if not _stale_nonce_or_fee(exc) or attempt >= _SEND_ATTEMPTS:
                            raise
                        self._fees = None
                        logger.info("relayer resync after %s (nonce %d)", exc.message, nonce)
                        continue
                except ChainUnavailableError as exc:
                    self._next_nonce = None
                    if not await self._node_knows(sent, exc):
                        raise
                self._next_nonce = nonce + 1
                return sent

    async def replace(
        self, sent: SentTransaction, *, to: str, data: str, gas: int, max_fee: int, priority_fee: int
    ) -> SentTransaction | None:
        """Send the call of `sent` again with its nonce and higher fees; None if that nonce is already mined.

        Raises:
            RpcError: the node refused the replacement (underpriced, say); the original stands.
            ChainUnavailableError: the node could not be reached and does not hold the replacement.
        """
        replacement = self._sign(sent.nonce, max_fee, priority_fee, to=to, data=data, gas=gas)
        try:
            await self._rpc.call("eth_sendRawTransaction", replacement.raw)
        except RpcError as exc:
            if _already_known(exc):
                return replacement
            if "nonce too low" in exc.message.lower():
                return None
            raise
        except ChainUnavailableError as exc:
            if not await self._node_knows(replacement, exc):
                raise
        return replacement

    def _sign(
        self, nonce: int, max_fee: int, priority_fee: int, *, to: str, data: str, gas: int
    ) -> SentTransaction:
        signed = sign_eip1559(
            self._key,
            chain_id=self._chain_id,
            nonce=nonce,
            max_priority_fee_per_gas=priority_fee,
            max_fee_per_gas=max_fee,
            gas=gas,
            to=to,
            data=bytes.fromhex(data[2:]),
        )
        return SentTransaction(
            tx_hash="0x" + signed.hash.hex(),
            raw="0x" + signed.raw.hex(),
            nonce=nonce,
            sender=self.address,
            max_fee_per_gas=max_fee,
            max_priority_fee_per_gas=priority_fee,
        )

    async def rebroadcast(self, raw: str) -> bool:
        """Send an already-signed transaction of ours again (it left the pool); False if its nonce is taken.

        Raises:
            RpcError: the node refused it for another reason.
            ChainUnavailableError: the node could not be reached.
        """
        try:
            await self._rpc.call("eth_sendRawTransaction", raw)
        except RpcError as exc:
            if _already_known(exc):
                return True
            if "nonce too low" in exc.message.lower():
                return False
            raise
        return True

    async def _nonce(self) -> int:
        if self._next_nonce is None:
            self._next_nonce = int(
                await self._rpc.call("eth_getTransactionCount", self.address, "pending"), 16
            )
        return self._next_nonce

    async def _node_knows(self, sent: SentTransaction, lost: ChainUnavailableError) -> bool:
        """Whether the node holds `tx_hash` (after a send whose answer was lost).

        Raises:
            BroadcastUncertainError: the node cannot be asked either, so the transaction may be out there.
        """
        try:
            return await self._rpc.call("eth_getTransactionByHash", sent.tx_hash) is not None
        except ChainUnavailableError:
            raise BroadcastUncertainError(sent, str(lost)) from lost

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
            # Twice the base fee survives six consecutive full blocks of +12.5% each; a spike beyond that is
            # met by replacing the transaction (`FeeBumper`), never by a cap above the operator's ceiling.
            max_fee = 2 * base_fee + priority
            if self._max_fee_per_gas is not None:
                max_fee = min(max_fee, self._max_fee_per_gas)
                priority = min(priority, max_fee)
            self._fees = (now, max_fee, priority)
        return self._fees[1], self._fees[2]


def _already_known(exc: RpcError) -> bool:
    text = exc.message.lower()
    return "already known" in text or "already imported" in text or "known transaction" in text


def _stale_nonce_or_fee(exc: RpcError) -> bool:
    text = exc.message.lower()
    return any(
        phrase in text
        for phrase in (
            "nonce too low",
            "nonce too high",
            "replacement transaction underpriced",
            "less than block base fee",
        )
    )
