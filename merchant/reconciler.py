"""The reconciler: compares claims, offers and the ledger with the chain, and finishes what it can.

One pass (`x402-merchant reconcile`, and periodically inside the service):

1. the in-process facilitator finishes its own claims: pending transactions awaited (and broadcast again
   if they left the pool), claims whose owner vanished before broadcasting released;
2. paid turns whose executor is gone are finished (`PaymentRecovery`): settled, booked, delivered, or
   failed with nothing charged; tasks whose payment was decided but never reached them are told; paid
   tasks the ledger lacks are booked;
3. every booked settlement not yet final is checked on chain: at the configured depth it is finalized
   (`settlement.finalized`); if its transaction left the chain (a reorg) and its authorization can no
   longer be used (expired and unused), the booking is reversed (`settlement.reversed`). While the
   authorization can still land it is left alone: the facilitator puts the transaction back.

Differences it cannot resolve are reported, not guessed at.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from facilitator import ChainError, Facilitator, FacilitatorClient, RpcClient, authorization_used
from facilitator.wire import PaymentPayload

from .ledger import BookedEntry, Ledger
from .payments import OfferStore, PaymentRecovery

__all__ = ["ReconcileReport", "Reconciler"]

logger = logging.getLogger(__name__)


@dataclass
class ReconcileReport:
    """What one pass did and what it could not resolve."""

    claims_moved: int = 0
    turns_finished: int = 0
    told_late: int = 0
    booked_late: int = 0
    finalized: int = 0
    reversed: int = 0
    unresolved: list[str] = field(default_factory=list)


class Reconciler:
    """Brings the merchant's records and the chain back into agreement; safe on every replica."""

    def __init__(
        self,
        *,
        facilitator: FacilitatorClient,
        recovery: PaymentRecovery,
        offers: OfferStore,
        ledger: Ledger,
        rpc: RpcClient,
        confirmations: int,
    ):
        self._facilitator = facilitator
        self._recovery = recovery
        self._offers = offers
        self._ledger = ledger
        self._rpc = rpc
        self._confirmations = confirmations

    async def aclose(self) -> None:
        """Close the reconciler's chain connection."""
        await self._rpc.aclose()

    async def run_once(self) -> ReconcileReport:
        """One reconciliation pass."""
        report = ReconcileReport()
        if isinstance(self._facilitator, Facilitator):
            report.claims_moved = await self._facilitator.reconcile()
        report.turns_finished = await self._recovery.finish_abandoned()
        report.told_late = await self._recovery.tell_untold()
        report.booked_late = await self._recovery.book_unbooked()
        for entry in await self._ledger.unfinalized_settlements():
            try:
                await self._check_on_chain(entry, report)
            except ChainError as exc:
                report.unresolved.append(f"{entry.id}: chain unavailable ({exc})")
        return report

    async def run(self, stop: asyncio.Event, *, interval_s: float = 30.0) -> None:
        """Reconcile every `interval_s` until `stop` is set; a failed pass is logged and retried."""
        while not stop.is_set():
            try:
                report = await self.run_once()
                if report.unresolved:
                    logger.warning("reconcile: unresolved: %s", "; ".join(report.unresolved))
            except Exception:  # noqa: BLE001 - the loop must survive one bad pass
                logger.exception("reconcile pass failed")
            try:
                await asyncio.wait_for(stop.wait(), interval_s)
            except TimeoutError:
                pass

    async def _check_on_chain(self, entry: BookedEntry, report: ReconcileReport) -> None:
        receipt = await self._rpc.call("eth_getTransactionReceipt", entry.tx_hash)
        if receipt is not None and int(receipt.get("status", "0x0"), 16) == 1:
            depth = int(await self._rpc.call("eth_blockNumber"), 16) - int(receipt["blockNumber"], 16) + 1
            if depth >= self._confirmations:
                await self._ledger.mark_final(entry.id, confirmations=depth)
                report.finalized += 1
            return
        if await authorization_used(self._rpc, entry.asset, entry.payer, entry.nonce):
            report.unresolved.append(
                f"{entry.id}: {entry.tx_hash} is off chain, but another transaction used the authorization"
            )
            return
        valid_before = await self._valid_before(entry)
        if valid_before is None or valid_before > time.time():
            return  # it may still land: the facilitator puts the transaction back in the pool
        await self._ledger.reverse_settlement(
            entry.id, reason="reorg: the settlement left the chain and expired"
        )
        report.reversed += 1
        logger.warning(
            "reversed %s: %s left the chain and its authorization expired", entry.id, entry.tx_hash
        )

    async def _valid_before(self, entry: BookedEntry) -> int | None:
        offer = await self._offers.by_authorization(entry.payer, entry.nonce)
        if offer is None or offer.payload is None:
            return None
        return PaymentPayload.from_wire(offer.payload).payload.authorization.valid_before
