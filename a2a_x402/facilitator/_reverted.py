"""A settlement that reverted: remembered (its payer cools off, its gas counts against the relayer's
budget), and, when it left the authorization unused, its claim released so it can pay later."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from ._answers import Answers, read_within
from ._claims import Claim, ClaimState
from ._errors import ChainError
from ._receipts import Receipt
from ._records import ClaimRecords
from ._reverts import RevertedSettlement, RevertGuard, wallet_code_hash
from ._rpc import RpcClient
from ._truth import AuthorizationOnChain
from .wire import Reason, SettleResponse, checksum_address

__all__ = ["MAX_SETTLE_ATTEMPTS", "RevertedRelease"]

logger = logging.getLogger(__name__)

# Each reverted attempt costs the relayer gas: a wallet that passes simulation and reverts on chain must not
# be able to make it pay again and again for one authorization.
MAX_SETTLE_ATTEMPTS = 3


class RevertedRelease:
    """Decides whether a reverted settlement's authorization can still pay, and releases its claim if so."""

    def __init__(self, rpc: RpcClient, records: ClaimRecords, answers: Answers, guard: RevertGuard):
        self._rpc = rpc
        self._records = records
        self._answers = answers
        self._guard = guard

    async def remember(self, claim: Claim, receipt: Receipt, deadline: float | None) -> None:
        """Record that our transaction for `claim` reverted: its payer (and wallet code) cool off, and the
        gas it burned counts against its relayer's budget. A failure to record is logged, never raised:
        the claim's own outcome must still be recorded."""
        raw = receipt.raw
        try:
            gas_wei = int(raw.get("gasUsed", "0x0"), 16) * int(raw.get("effectiveGasPrice", "0x0"), 16)
            relayer = checksum_address(raw.get("from") or claim.relayer or "")
        except (TypeError, ValueError) as exc:
            logger.warning("claim %s: reverted receipt %s unreadable: %s", claim.id, receipt.tx_hash, exc)
            return
        try:
            code = await read_within(self._rpc.call("eth_getCode", claim.payer, "latest"), deadline)
        except ChainError as exc:
            # Without its code the payer still cools off; its code may, at its next revert.
            logger.warning("claim %s: payer's code unread after a revert: %s", claim.id, exc)
            code = None
        revert = RevertedSettlement(receipt.tx_hash, relayer, claim.payer, wallet_code_hash(code), gas_wei)
        try:
            await self._guard.record(revert)
        except SQLAlchemyError as exc:
            logger.warning("claim %s: revert of %s not recorded: %s", claim.id, receipt.tx_hash, exc)

    async def release(
        self,
        claim: Claim,
        state: AuthorizationOnChain,
        receipt: Receipt,
        tx_hash: str,
        sent_fields: dict[str, Any],
    ) -> SettleResponse | None:
        """Release a claim whose transaction reverted without using the authorization (out of gas, say).

        The payer was not charged and the authorization can still pay, so the claim must not end `failed`
        (every retry would be refused as a duplicate). Releasing cannot settle twice: the reverted
        transaction is final, and the token uses an authorization at most once, so whichever later
        transaction carries it either pays (once) or reverts and is then matched to the one that paid.
        None when the chain's `state` shows the authorization used (cancelled, or paid elsewhere) or
        expired, or when this was the claim's `MAX_SETTLE_ATTEMPTS`th transaction: a failure for good.
        """
        if claim.attempt >= MAX_SETTLE_ATTEMPTS:
            logger.warning("claim %s: attempt %d reverted too; not released again", claim.id, claim.attempt)
            return None
        if state.used or state.expired:
            return None
        logger.warning("claim %s: %s reverted and left the authorization unused; released", claim.id, tx_hash)
        failure = self._answers.failure(
            Reason.TRANSACTION_FAILED,
            "the settlement transaction reverted without moving the funds; the authorization is unused "
            "and may be settled again",
            claim.payer,
            transaction=tx_hash,
        )
        return await self._records.record(
            claim,
            failure,
            state=ClaimState.RELEASED,
            error_reason=Reason.TRANSACTION_FAILED.value,
            tx_hash=tx_hash,
            block_number=receipt.block_number,
            block_hash=receipt.block_hash,
            **sent_fields,
        )
