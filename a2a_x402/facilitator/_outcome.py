"""From a claimed authorization to its recorded outcome: the broadcast and the wait for its receipt."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ._answers import SEND_UNDECIDED, Answers, remaining
from ._claims import Claim, ClaimState, ClaimStore
from ._elsewhere import SettledElsewhere
from ._errors import ChainError, RpcError
from ._found import ThirdPartySettlement, paid_claim
from ._pool import NoRelayerError, RelayerPool
from ._presented import Sendable
from ._records import ClaimRecords
from ._recovery import Recovery
from ._relayer import BroadcastUncertainError, SentTransaction
from ._replacement import FeeBumper
from ._reverted import RevertedRelease
from ._truth import ChainTruth
from .wire import Reason, SettleResponse

__all__ = ["Outcomes"]

logger = logging.getLogger(__name__)

# A receipt usually arrives within a few blocks' time on a fast chain; past this, record the broadcast first.
_QUICK_RECEIPT_S = 0.25


class Outcomes:
    """Broadcasts claimed settlements and records what their transactions did on chain."""

    def __init__(
        self,
        *,
        claims: ClaimStore,
        relayer: RelayerPool,
        watcher: FeeBumper,
        recovery: Recovery,
        records: ClaimRecords,
        elsewhere: SettledElsewhere,
        reverted: RevertedRelease,
        truth: ChainTruth,
        answers: Answers,
        confirmations: int,
        gas_limit_cap: int,
    ):
        self._claims = claims
        self._relayer = relayer
        self._watcher = watcher
        self._recovery = recovery
        self._records = records
        self._elsewhere = elsewhere
        self._reverted = reverted
        self._truth = truth
        self._answers = answers
        self._confirmations = confirmations
        self._gas_limit_cap = gas_limit_cap
        # Pool checks under way, by claim id; one that outlives its caller's budget is left to finish
        # (or cut short by `aclose`).
        self._pool_checks: dict[str, asyncio.Task[str | ThirdPartySettlement]] = {}

    async def aclose(self) -> None:
        """Cut short the pool checks still under way."""
        checks = list(self._pool_checks.values())
        for task in checks:
            task.cancel()
        await asyncio.gather(*checks, return_exceptions=True)

    async def broadcast(
        self, claim: Claim, verified: Sendable, deadline: float, *, sender: str | None = None
    ) -> SettleResponse:
        """Send the claim's settlement (from `sender`'s key alone, when given) and wait (within the
        deadline) for its outcome."""
        # The verifier refused estimates over the cap; the margin covers state that changes before mining.
        gas = min(self._gas_limit_cap, verified.gas_estimate * 5 // 4 + 10_000)
        try:
            sent = await self._relayer.send(
                verified.target,
                verified.calldata,
                gas,
                claim_id=claim.id,
                wait_s=remaining(deadline),
                sender=sender,
            )
        except BroadcastUncertainError as exc:
            # Maybe out there: record it as broadcast; the receipt wait and `reconcile` settle the doubt.
            logger.warning("broadcast of claim %s uncertain: %s", claim.id, exc)
            sent = exc.sent
        except ChainError as exc:
            logger.warning("broadcast of claim %s failed: %s", claim.id, exc)
            return await self._send_failed(claim, exc, deadline)
        logger.debug("claim %s broadcast as %s (relayer nonce %d)", claim.id, sent.tx_hash, sent.nonce)
        return await self.wait(claim, deadline, sent=sent)

    async def _send_failed(self, claim: Claim, exc: ChainError, deadline: float) -> SettleResponse:
        """The answer to a send that failed, once the chain says what became of the authorization: a node
        that answered the send with an error (or lost its answer) may have taken it anyway."""
        try:
            judged = await self._truth.judge(claim, deadline, pool=True)
        except ChainError as unread:
            logger.warning("claim %s: the chain unread after its send failed: %s", claim.id, unread)
            if not isinstance(exc, NoRelayerError):
                # Only the chain may say nothing was charged. The claim stays claimed, so a later call or
                # `reconcile` (once its lease runs out) records what the chain did; until then the answer
                # is pending, naming no transaction.
                return self._answers.pending(claim, message=SEND_UNDECIDED)
            judged = None  # no key took the send: nothing was handed to any node
        if isinstance(judged, SettleResponse):
            return judged
        if judged is not None and judged.in_pool:
            # Something the node holds uses the authorization (our send after all, or another): the
            # claim stays claimed, and once its lease runs out `reconcile` records what was mined.
            logger.warning("claim %s: its authorization is used in the pending block", claim.id)
            return self._answers.pending(claim)
        response = self._answers.failure(
            Reason.TRANSACTION_FAILED if isinstance(exc, RpcError) else Reason.UNEXPECTED_SETTLE_ERROR,
            "the settlement transaction could not be submitted; nothing was charged",
            claim.payer,
        )
        return await self._records.record(claim, response, state=ClaimState.RELEASED)

    async def wait(
        self,
        claim: Claim,
        deadline: float,
        *,
        sent: SentTransaction | None = None,
        bounded_revive: bool = True,
    ) -> SettleResponse:
        """Wait for the claim's transaction at the configured depth and record what it did.

        A transaction just `sent` is recorded with the outcome in one write when its receipt comes
        quickly; a slower one is recorded as broadcast first, so a crash while waiting leaves its hash
        and signed bytes behind. (A crash before either write leaves a claim whose authorization the chain
        shows as used: `reconcile` finds the transaction by its `AuthorizationUsed` log.) A transaction
        broadcast earlier is first checked to still be in the pool or mined; that check keeps to the
        caller's budget too, unless `bounded_revive` is off (a reconcile pass, with no caller waiting).
        """
        receipt = None
        if sent is not None:
            tx_hash = sent.tx_hash
            quick_s = min(_QUICK_RECEIPT_S, remaining(deadline))
            receipt = await self._watcher.wait(tx_hash, confirmations=self._confirmations, timeout_s=quick_s)
            if receipt is None:
                await self._claims.mark_broadcast(
                    claim.id, relayer=sent.sender, relayer_nonce=sent.nonce, tx_hash=tx_hash, raw_tx=sent.raw
                )
                sent = None
        else:
            # Broadcast earlier: first make sure the transaction has not silently left the pool, so one
            # dropped is sent again in time to be mined while this caller waits.
            revived = await self._pool_check(claim, claim.tx_hash or "", deadline, bounded=bounded_revive)
            if isinstance(revived, ThirdPartySettlement):
                return await self._elsewhere.record(claim, revived)
            tx_hash = revived
        if receipt is None:
            receipt = await self._watcher.wait(
                tx_hash, confirmations=self._confirmations, timeout_s=remaining(deadline)
            )
        if receipt is None:
            return await self._records.record(claim, self._answers.pending(claim, tx_hash))
        if receipt.tx_hash != tx_hash:
            # Of a transaction and its fee-bumped replacements (one nonce), the one mined is the settlement.
            tx_hash, sent = receipt.tx_hash, self._watcher.sent(receipt.tx_hash)
        sent_fields: dict[str, Any] = (
            {"relayer": sent.sender, "relayer_nonce": sent.nonce, "raw_tx": sent.raw}
            if sent is not None
            else {}
        )
        if receipt.status == 1 and paid_claim(claim, receipt.raw):
            logger.info("claim %s settled by %s in block %d", claim.id, tx_hash, receipt.block_number)
            return await self._records.success(
                claim, tx_hash, receipt.block_number, receipt.block_hash, **sent_fields
            )
        within = deadline if bounded_revive else None
        if receipt.status != 1:
            await self._reverted.remember(claim, receipt, within)
        # The receipt says what one transaction did; the chain, what became of the payment.
        try:
            judged = await self._truth.judge(claim, within)
        except ChainError as exc:
            return await self._records.undecided(claim, tx_hash, sent_fields, exc)
        if isinstance(judged, SettleResponse):
            return judged
        if receipt.status != 1:
            released = await self._reverted.release(claim, judged, receipt, tx_hash, sent_fields)
            if released is not None:
                return released
            reason, message = Reason.TRANSACTION_FAILED, "the settlement transaction reverted"
        else:
            reason = Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH
            message = "the transaction did not transfer the authorized amount"
        logger.warning("claim %s failed on chain in %s: %s", claim.id, tx_hash, reason)
        failure = self._answers.failure(reason, message, claim.payer, transaction=tx_hash)
        return await self._records.record(
            claim,
            failure,
            state=ClaimState.FAILED,
            error_reason=reason.value,
            tx_hash=tx_hash,
            block_number=receipt.block_number,
            block_hash=receipt.block_hash,
            **sent_fields,
        )

    async def _pool_check(
        self, claim: Claim, tx_hash: str, deadline: float, *, bounded: bool
    ) -> str | ThirdPartySettlement:
        """`Recovery.safely`, within the caller's budget when `bounded`: past the deadline, `tx_hash`.

        Each of its RPC calls may take the whole RPC timeout on a stalled node, so it runs as a task of
        its own (one per claim at a time) and only the wait is cut short: the check carries on, and a
        transaction it re-sends is still recorded with the claim, never abandoned half-sent.
        """
        task = self._pool_checks.get(claim.id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._recovery.safely(claim, tx_hash))
            self._pool_checks[claim.id] = task
            task.add_done_callback(lambda _: self._pool_checks.pop(claim.id, None))
        if not bounded:
            return await asyncio.shield(task)
        try:
            return await asyncio.wait_for(asyncio.shield(task), remaining(deadline))
        except TimeoutError:
            logger.info("claim %s: the pool check of %s outlasted the caller's budget", claim.id, tx_hash)
            return tx_hash
