"""Waiting for receipts and confirmations, batched.

Every waiter of the process shares one polling loop: each tick asks the node for the head block and for
the receipts still missing in a single JSON-RPC batch, so fifty concurrent settlements cost one round trip
per tick instead of fifty. On a node polled every few milliseconds (one that mines on arrival: anvil's
automine, a dev chain) a lone settlement is looked at again sooner for its first few polls: such a node
answers the send a moment before the block is in, and waiting a whole interval for that moment was most
of a lone settlement's wait for its receipt. A chain with real block times is polled at its interval
only, so a metered RPC provider sees no extra calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from ._errors import ChainUnavailableError, RpcError
from ._rpc import RpcCall, RpcClient

__all__ = ["Receipt", "ReceiptWatcher", "next_pause"]

logger = logging.getLogger(__name__)

# A lone waiter's first polls come this soon after each other (event loops round a timer up to the
# millisecond, so about 1 ms in practice): with one settlement waiting a tick is one small request, and
# this bounds the extra ones to a few. Only for intervals short enough to mean a chain that mines on arrival.
_QUICK_POLL_S = 0.0005
_QUICK_POLLS = 3
_QUICK_POLLS_UP_TO_INTERVAL_S = 0.01


@dataclass(frozen=True, slots=True)
class Receipt:
    """A mined transaction with enough confirmations on top of it."""

    tx_hash: str
    status: int
    block_number: int
    block_hash: str
    raw: dict[str, Any]


@dataclass(eq=False)
class _Waiter:
    tx_hash: str
    confirmations: int
    future: asyncio.Future[Receipt]
    polls: int = 0


class ReceiptWatcher:
    """Resolves `wait()` calls once a transaction is mined with the requested depth."""

    def __init__(self, rpc: RpcClient, *, poll_interval_s: float = 0.003):
        self._rpc = rpc
        self._poll_interval_s = poll_interval_s
        self._waiters: set[_Waiter] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def poll_interval_s(self) -> float:
        """How often pending receipts are polled."""
        return self._poll_interval_s

    async def wait(self, tx_hash: str, *, confirmations: int, timeout_s: float) -> Receipt | None:
        """The receipt of `tx_hash` once `confirmations` blocks include it, or None after `timeout_s`."""
        self._ensure_running()
        waiter = _Waiter(tx_hash, max(confirmations, 1), asyncio.get_running_loop().create_future())
        self._waiters.add(waiter)
        self._wakeup.set()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future), timeout_s)
        except TimeoutError:
            return None
        finally:
            self._waiters.discard(waiter)

    async def aclose(self) -> None:
        """Stop the polling loop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="receipt-watcher")

    async def _run(self) -> None:
        while True:
            if not self._waiters:
                self._wakeup.clear()
                await self._wakeup.wait()
            try:
                await self._tick()
            except (ChainUnavailableError, RpcError) as exc:
                logger.warning("receipt poll failed: %s", exc)
                await asyncio.sleep(min(0.5, self._poll_interval_s * 50))
            await asyncio.sleep(self._pause())

    def _pause(self) -> float:
        return next_pause([w.polls for w in self._waiters if not w.future.done()], self._poll_interval_s)

    async def _tick(self) -> None:
        waiters = [w for w in self._waiters if not w.future.done()]
        if not waiters:
            return
        # Receipts are fetched again until final, so a reorg that moves or drops the transaction is seen.
        hashes = sorted({w.tx_hash for w in waiters})
        replies = await self._rpc.batch(
            [RpcCall("eth_blockNumber", []), *(RpcCall("eth_getTransactionReceipt", [h]) for h in hashes)]
        )
        head_reply, receipt_replies = replies[0], replies[1:]
        if isinstance(head_reply, RpcError):
            raise head_reply
        head = int(head_reply, 16)
        for waiter in waiters:
            waiter.polls += 1
        receipts = {h: r for h, r in zip(hashes, receipt_replies, strict=True) if isinstance(r, dict)}
        for waiter in waiters:
            receipt = receipts.get(waiter.tx_hash)
            if receipt is None or receipt.get("blockNumber") is None:
                continue  # not mined yet (some nodes answer a pending receipt without a block)
            block_number = int(receipt["blockNumber"], 16)
            if head - block_number + 1 >= waiter.confirmations:
                waiter.future.set_result(
                    Receipt(
                        tx_hash=waiter.tx_hash,
                        status=int(receipt.get("status", "0x0"), 16),
                        block_number=block_number,
                        block_hash=receipt["blockHash"],
                        raw=receipt,
                    )
                )


def next_pause(pending_polls: list[int], interval_s: float) -> float:
    """How long until the next tick, given how often each pending waiter has been polled: the interval,
    or on a chain polled every few milliseconds a quick look again at a lone new waiter."""
    if (
        interval_s <= _QUICK_POLLS_UP_TO_INTERVAL_S
        and len(pending_polls) == 1
        and pending_polls[0] < _QUICK_POLLS
    ):
        return min(_QUICK_POLL_S, interval_s)
    return interval_s
