"""The reconciler: compares claims, offers and the ledger with the chain, and finishes what it can.

One pass (`x402-merchant reconcile`, and periodically inside the service):

1. the in-process facilitator finishes its own claims: pending transactions awaited (and broadcast again
   if they left the pool), claims whose owner vanished before broadcasting released;
2. paid turns whose executor is gone are finished (`PaymentRecovery`): settled, booked, delivered, or
   failed with nothing charged; tasks whose payment was decided but never reached them are told; paid
   tasks the ledger lacks are booked;
3. the chain is read: every EIP-3009 payment (`AuthorizationUsed` and its `Transfer`) and every Permit2
   payment (an x402 proxy's settlement of a permit and its `Transfer`) to a tenant's payTo in the last
   `lookback_blocks` blocks, read in bounded ranges, is matched against the ledger and
   the offers. A payment the ledger lacks whose authorization was submitted for a paid offer, to that
   offer's payTo and amount, is booked; any other (no offer behind it, an offer told it failed or was
   declined, other terms, a reversed booking) is reported. A finalized booking to a watched payTo in
   that range whose transaction is no longer on the chain (a reorg deeper than the depth) is reported.
   A reconciler remembers how far it read: its next pass reads the new blocks and, again, only the last
   `confirmations` + `reorg_margin_blocks` (a reorg may still change them), or from a payment that could
   not be booked yet;
4. every booked settlement not yet final is checked on chain: at the configured depth it is finalized
   (`settlement.finalized`); if its transaction left the chain (a reorg) and its authorization can no
   longer be used (expired and unused), the booking is reversed (`settlement.reversed`). While the
   authorization can still land it is left alone: the facilitator puts the transaction back.

Differences it cannot resolve are reported, not guessed at: nothing is booked that no offer proves. Each
is a `Difference` of a kind, keyed by what it is about (a payment's payer and nonce, a booking's id), naming
the tenant or payTo it concerns (none when it is the operator's alone, such as an unreachable chain).
With a `DifferenceStore` they are stored, and stay open until the chain resolves them
(`_difference_checks`) or an operator does: readers (the dashboard, the CLI) read the store. A
chain whose genesis block changed since the last pass (a restarted dev chain) is one `chain_restarted`
difference: bookings made before it are not reported as reorged away.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

from eth_utils.address import to_checksum_address

from a2a_x402.facilitator import ChainError, Facilitator, FacilitatorClient, RpcClient
from a2a_x402.facilitator.wire import PaymentRequirements

from . import _difference_checks as checks
from ._chain_scan import ChainPayment, payments_to
from .differences import DifferenceStore
from .differences import _kinds as kinds
from .ledger import BookedEntry, EntryStatus, Ledger, LedgerError, SettlementBooking
from .payments import (
    Offer,
    OfferState,
    OfferStore,
    PaymentRecovery,
    exception_line,
    nonce_used,
    payment_from_wire,
    round_ap2,
    valid_before,
)

__all__ = ["RECONCILE_STAGES", "Difference", "ReconcileReport", "Reconciler"]

RECONCILE_STAGES = ("claims", "turns", "tell", "book", "scan", "finalize")
"""The stages of a pass, as `ReconcileReport.failed` and the failures metric name them."""

_T = TypeVar("_T")
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Problem:
    """Why a payment on chain does not agree with the records; `retry` if a later pass may resolve it."""

    text: str
    kind: str
    retry: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """A disagreement between the records and the chain that a pass could not resolve.

    `tenant` is the tenant whose booking it concerns, `pay_to` the payee address it concerns; both None
    for an operator's problem (the chain unreachable), whose text may name infrastructure. `kind` and
    `key` identify it across passes; `facts` are what a later check or a booking needs.
    """

    text: str
    tenant: str | None = None
    pay_to: str | None = None
    kind: str = kinds.OTHER
    key: str = ""
    facts: dict[str, Any] | None = field(default=None, compare=False)


@dataclass
class ReconcileReport:
    """What one pass did and what it could not resolve."""

    claims_moved: int = 0
    turns_finished: int = 0
    told_late: int = 0
    booked_late: int = 0
    booked_from_chain: int = 0
    finalized: int = 0
    reversed: int = 0
    # Items (or whole stages) this pass could not finish, by stage; each is retried by the next pass.
    failed: dict[str, int] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)

    def fail(self, stage: str) -> None:
        """Count one item of `stage` this pass could not finish."""
        self.failed[stage] = self.failed.get(stage, 0) + 1

    @property
    def unresolved(self) -> list[str]:
        """What the pass could not resolve, one line each."""
        return [difference.text for difference in self.differences]

    def differ(
        self,
        text: str,
        *,
        tenant: str | None = None,
        pay_to: str | None = None,
        kind: str = kinds.OTHER,
        key: str | None = None,
        facts: dict[str, Any] | None = None,
    ) -> None:
        """Record a difference the pass could not resolve (`key` defaults to its text)."""
        ident = (text if key is None else key)[:200]
        self.differences.append(
            Difference(text=text, tenant=tenant, pay_to=pay_to, kind=kind, key=ident, facts=facts)
        )


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
        asset: str,
        chain_id: int,
        pay_tos: Sequence[str],
        lookback_blocks: int,
        batch_blocks: int = 1_000,
        reorg_margin_blocks: int = 64,
        on_report: Callable[[ReconcileReport], None] | None = None,
        differences: DifferenceStore | None = None,
    ):
        self._facilitator = facilitator
        self._recovery = recovery
        self._offers = offers
        self._ledger = ledger
        self._rpc = rpc
        self._confirmations = confirmations
        self._asset = to_checksum_address(asset)
        self._chain_id = chain_id
        self._pay_tos = sorted(set(pay_tos))
        self._lookback_blocks = lookback_blocks
        self._batch_blocks = batch_blocks
        self._reorg_margin_blocks = reorg_margin_blocks
        # The last block the chain scan has read through; None until the first pass (then: the lookback).
        self._scanned_to: int | None = None
        self._last_pass_at: datetime | None = None
        self._on_report = on_report
        self._differences = differences

    async def aclose(self) -> None:
        """Close the reconciler's chain connection."""
        await self._rpc.aclose()

    @property
    def last_pass_at(self) -> datetime | None:
        """When this reconciler's last pass ended, or None before its first."""
        return self._last_pass_at

    async def run_once(self) -> ReconcileReport:
        """One reconciliation pass."""
        report = await self._pass()
        if self._differences is not None:
            await checks.store_differences(self._differences, report.differences, self._still_open)
        self._last_pass_at = datetime.now(UTC)
        if self._on_report is not None:
            self._on_report(report)
        return report

    async def _pass(self) -> ReconcileReport:
        """Every stage, each on its own: a stage (or one item of it) that fails is logged in one line,
        counted in the report and left to the next pass, and never stops the others."""
        report = ReconcileReport()
        if isinstance(self._facilitator, Facilitator):
            reconcile = partial(self._facilitator.reconcile, on_failure=partial(report.fail, "claims"))
            report.claims_moved = await self._stage(report, "claims", reconcile)
        recovery = self._recovery
        report.turns_finished = await self._stage(
            report, "turns", partial(recovery.finish_abandoned, on_failure=partial(report.fail, "turns"))
        )
        report.told_late = await self._stage(
            report, "tell", partial(recovery.tell_untold, on_failure=partial(report.fail, "tell"))
        )
        report.booked_late = await self._stage(
            report, "book", partial(recovery.book_unbooked, on_failure=partial(report.fail, "book"))
        )
        for tenant, pay_to, text in recovery.unproven:
            report.differ(
                text, tenant=tenant, pay_to=pay_to, kind=kinds.RECOVERY_UNPROVEN, key=text.split(": ", 1)[0]
            )
        try:
            await self._scan_chain(report)
        except ChainError as exc:
            report.differ(f"chain scan: chain unavailable ({exc})", kind=kinds.CHAIN_UNAVAILABLE, key="chain")
        except Exception as exc:  # noqa: BLE001 - the pass goes on without this stage
            logger.warning("reconcile: chain scan failed: %s", exception_line(exc))
            report.fail("scan")
        await self._stage(report, "finalize", partial(self._check_all_on_chain, report))
        return report

    async def _stage(self, report: ReconcileReport, stage: str, run: Callable[[], Awaitable[int]]) -> int:
        """`run()`, or 0 (logged in one line and counted) if it fails as a whole."""
        try:
            return await run()
        except Exception as exc:  # noqa: BLE001 - one stage must never stop the pass
            logger.warning("reconcile: stage %s failed (retried next pass): %s", stage, exception_line(exc))
            report.fail(stage)
            return 0

    async def _check_all_on_chain(self, report: ReconcileReport) -> int:
        for entry in await self._ledger.unfinalized_settlements():
            try:
                await self._check_on_chain(entry, report)
            except ChainError as exc:
                report.differ(
                    f"{entry.id}: chain unavailable ({exc})", kind=kinds.CHAIN_UNAVAILABLE, key="chain"
                )
            except Exception as exc:  # noqa: BLE001 - one settlement must never stop the others'
                logger.warning("reconcile: checking %s postponed: %s", entry.id, exception_line(exc))
                report.fail("finalize")
        return 0

    async def run(self, stop: asyncio.Event, *, interval_s: float = 30.0) -> None:
        """Reconcile every `interval_s` until `stop` is set; a failed pass is logged and retried.

        A pass still running when `stop` is set is cancelled: a pass can take long (a settlement the chain
        does not show yet is waited for, item after item), and the server's shutdown waits for this loop.
        Every stage is safe to interrupt (a cancelled item is as if the process had stopped there), and the
        next run's first pass takes it up again.
        """
        while not stop.is_set():
            try:
                # Each stored difference's change is logged in one line as it happens (DifferenceStore).
                if await _unless_stopped(self.run_once(), stop) is None:
                    logger.info("reconcile: the pass running at shutdown was stopped; the next run redoes it")
                    return
            except Exception:  # noqa: BLE001 - the loop must survive one bad pass
                logger.exception("reconcile pass failed")
            try:
                await asyncio.wait_for(stop.wait(), interval_s)
            except TimeoutError:
                pass

    async def _scan_chain(self, report: ReconcileReport) -> None:
        restarted_at = None
        if self._differences is not None:
            restart = await checks.chain_restart(self._differences, self._rpc, self._chain_id)
            restarted_at = restart.since
            if restart.text is not None:
                self._scanned_to = None  # the old chain's blocks are gone: read the new one from the lookback
                report.differ(restart.text, kind=kinds.CHAIN_RESTARTED, key=restart.genesis)
        head = int(await self._rpc.call("eth_blockNumber"), 16)
        from_block = max(head - self._lookback_blocks + 1, 0)
        if self._scanned_to is not None:
            # Read before: only as deep as a reorg may still have changed (min: the chain may be shorter).
            reread = self._confirmations + self._reorg_margin_blocks
            from_block = max(from_block, min(self._scanned_to, head) - reread + 1)
        payments = await payments_to(
            self._rpc,
            self._asset,
            self._pay_tos,
            from_block=from_block,
            to_block=head,
            batch_blocks=self._batch_blocks,
        )
        booked = {
            (entry.payer, entry.nonce): entry
            for entry in await self._ledger.settlements_of(
                self._chain_id, self._asset, [payment.nonce for payment in payments]
            )
        }
        scanned_to = head
        for payment in payments:
            problem = await self._match(payment, booked.get((payment.payer, payment.nonce)), report)
            if problem is not None:
                report.differ(
                    f"{payment.tx_hash}: {payment.amount} paid to {payment.pay_to} by {payment.payer} "
                    f"(nonce {payment.nonce}) {problem.text}",
                    pay_to=payment.pay_to,
                    kind=problem.kind,
                    key=f"{payment.payer}:{payment.nonce}",
                    facts=checks.payment_facts(payment, asset=self._asset, chain_id=self._chain_id),
                )
                if problem.retry:
                    scanned_to = min(scanned_to, payment.block_number - 1)
        on_chain = {(p.payer, p.nonce) for p in payments}
        finalized = await self._ledger.finalized_settlements_since(
            self._chain_id, self._asset, self._pay_tos, from_block
        )
        for entry in finalized:
            if restarted_at is not None and entry.booked_at < restarted_at:
                continue  # booked on the chain before its restart: said once, as chain_restarted
            if (entry.payer, entry.nonce.lower()) not in on_chain:
                report.differ(
                    f"{entry.id}: finalized, but {entry.tx_hash} is no longer on the chain (a reorg deeper "
                    f"than {self._confirmations} blocks)",
                    tenant=entry.tenant,
                    pay_to=entry.pay_to,
                    kind=kinds.REORGED_OUT,
                    key=entry.id,
                    facts={"tx_hash": entry.tx_hash},
                )
        self._scanned_to = scanned_to

    async def _match(
        self, payment: ChainPayment, entry: BookedEntry | None, report: ReconcileReport
    ) -> _Problem | None:
        """Book `payment` if an offer proves it is that offer's; otherwise what is wrong with it."""
        if entry is not None:
            if entry.status is EntryStatus.REVERSED:
                return _Problem(
                    f"is on chain, but its booking {entry.id} was reversed", kinds.BOOKING_REVERSED
                )
            if (entry.pay_to, entry.amount) != (payment.pay_to, payment.amount):
                return _Problem(
                    f"is booked as {entry.amount} to {entry.pay_to} in {entry.id}", kinds.BOOKED_DIFFERENTLY
                )
            return None
        offer = await self._offers.by_authorization(payment.payer, payment.nonce)
        if offer is None or offer.payload is None or offer.accepted is None:
            return _Problem(
                "is not in the ledger, and no offer was paid with its authorization", kinds.UNBOOKED_PAYMENT
            )
        if offer.state in (OfferState.WORKING, OfferState.SETTLING):
            return None  # being taken right now, or left to recovery: booked when it is recorded paid
        if offer.state is not OfferState.PAID:
            return _Problem(
                f"is not in the ledger, and task {offer.task_id} was told its payment is {offer.state.value}",
                kinds.TOLD_FAILED,
            )
        requirements = PaymentRequirements.from_wire(offer.accepted)
        # A metered (`upto`) payment settles what the work used: at most the accepted amount.
        metered = requirements.scheme == "upto"
        amount_agrees = (
            payment.amount <= requirements.amount if metered else payment.amount == requirements.amount
        )
        terms = (requirements.pay_to, to_checksum_address(requirements.asset))
        if not amount_agrees or terms != (payment.pay_to, self._asset):
            return _Problem(f"does not match the terms task {offer.task_id} accepted", kinds.TERMS_DIFFER)
        if await self._ledger.has_authorization(self._chain_id, self._asset, payment.payer, payment.nonce):
            return None  # booked by the task's own turn since the ledger was read
        if await self._book_from_chain(offer, requirements, payment):
            report.booked_from_chain += 1
            return None
        return _Problem(
            f"belongs to task {offer.task_id} but could not be booked now", kinds.NOT_BOOKED_YET, retry=True
        )

    async def _book_from_chain(
        self, offer: Offer, requirements: PaymentRequirements, payment: ChainPayment
    ) -> bool:
        booking = SettlementBooking(
            tenant=offer.tenant,
            task_id=offer.task_id,
            context_id=offer.context_id,
            payer=payment.payer,
            pay_to=payment.pay_to,
            asset=requirements.asset,
            network=requirements.network,
            chain_id=requirements.chain_id,
            amount=payment.amount,
            nonce=payment.nonce,
            tx_hash=payment.tx_hash,
            block_number=payment.block_number,
            settled_at=datetime.now(UTC),
            maximum=requirements.amount if requirements.scheme == "upto" else None,
        )
        try:
            await self._ledger.book_settlement(
                booking,
                along=partial(self._offers.mark_booked, task_id=offer.task_id),
                ap2_of=round_ap2(offer.task_id, offer.round, offer.payload_hash),
            )
        except LedgerError:
            logger.exception("the payment of task %s in %s cannot be booked", offer.task_id, payment.tx_hash)
            return False
        logger.warning(
            "booked task %s from the chain: %s was not in the ledger", offer.task_id, payment.tx_hash
        )
        return True

    async def _check_on_chain(self, entry: BookedEntry, report: ReconcileReport) -> None:
        receipt = await self._rpc.call("eth_getTransactionReceipt", entry.tx_hash)
        if receipt is not None and int(receipt.get("status", "0x0"), 16) == 1:
            depth = int(await self._rpc.call("eth_blockNumber"), 16) - int(receipt["blockNumber"], 16) + 1
            if depth >= self._confirmations:
                await self._ledger.mark_final(entry.id, confirmations=depth)
                report.finalized += 1
            return
        if await nonce_used(self._rpc, entry.asset, entry.payer, entry.nonce):
            report.differ(
                f"{entry.id}: {entry.tx_hash} is off chain, but another transaction used the authorization",
                tenant=entry.tenant,
                pay_to=entry.pay_to,
                kind=kinds.AUTHORIZATION_REUSED,
                key=entry.id,
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

    async def _still_open(self, kind: str, facts: dict[str, Any]) -> str | None:
        """Why a stored difference this pass did not see is resolved now, or None if it still stands."""
        return await checks.resolution(self._rpc, self._ledger, kind, facts)

    async def _valid_before(self, entry: BookedEntry) -> int | None:
        offer = await self._offers.by_authorization(entry.payer, entry.nonce)
        if offer is None or offer.payload is None:
            return None
        return valid_before(payment_from_wire(offer.payload))


async def _unless_stopped(work: Awaitable[_T], stop: asyncio.Event) -> _T | None:
    """`work`'s result, or None once `stop` is set first (then `work` is cancelled and awaited)."""
    running = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not running.done():
            running.cancel()
            # Wait for the cancelled pass to unwind (its transactions roll back) before the engine closes.
            await asyncio.wait({running})
    if running.cancelled():
        return None
    return running.result()
