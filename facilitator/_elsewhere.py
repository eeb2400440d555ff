"""Someone else's settlement: finding a transaction that used an authorization to pay the payee.

Anyone holding a signed EIP-3009 authorization may submit it (spec §15.6). When someone did, the payer paid
the payee exactly once and the settlement is theirs; whether it counts for the caller depends on when it
was mined (see `Facilitator.settle`). Every search keeps to the caller's deadline.
"""

from __future__ import annotations

import logging

from ._answers import Answers, read_within, remaining
from ._claims import Claim
from ._errors import ChainError
from ._receipts import Receipt, ReceiptWatcher
from ._records import ClaimRecords
from ._recovery import Recovery, ThirdPartySettlement, find_settlement
from ._request import PaymentRequest
from ._rpc import RpcClient
from .wire import Reason, SettleResponse

__all__ = ["SettledElsewhere"]

logger = logging.getLogger(__name__)

# Someone else's transaction counts as the settlement of a payment only if it was mined after the caller
# took the payment; block timestamps and the caller's clock may disagree by this much (a rollup stamps a
# block with the start of its slot, and hosts' clocks drift).
PRESENTED_SKEW_S = 5


class SettledElsewhere:
    """Looks for, dates and confirms transactions not ours that settled an authorization."""

    def __init__(
        self,
        rpc: RpcClient,
        recovery: Recovery,
        watcher: ReceiptWatcher,
        records: ClaimRecords,
        answers: Answers,
        *,
        confirmations: int,
    ):
        self._rpc = rpc
        self._recovery = recovery
        self._watcher = watcher
        self._records = records
        self._answers = answers
        self._confirmations = confirmations

    async def find(self, request: PaymentRequest, deadline: float) -> ThirdPartySettlement | None:
        """The mined transaction that used this authorization to pay the payee, looked for within the
        caller's budget; None if there is none, or if the chain could not tell in time."""
        auth, terms = request.authorization, request.terms
        try:
            return await read_within(
                find_settlement(
                    self._rpc,
                    asset=terms.asset,
                    payer=auth.from_,
                    nonce="0x" + auth.nonce.hex(),
                    pay_to=terms.pay_to,
                    amount=terms.amount,
                ),
                deadline,
            )
        except ChainError as exc:
            logger.warning("settle could not look for a front-running transaction: %s", exc)
            return None

    async def confirmed(
        self, request: PaymentRequest, settled: ThirdPartySettlement, deadline: float
    ) -> Receipt | SettleResponse:
        """`settled`'s receipt at the configured depth, or a pending answer naming it until then."""
        receipt = await self._watcher.wait(
            settled.tx_hash, confirmations=self._confirmations, timeout_s=remaining(deadline)
        )
        if receipt is None:
            # Not deep enough yet: nothing is recorded, so asking again finds it once it is.
            return self._answers.failure(
                Reason.SETTLEMENT_PENDING,
                "the payment was submitted by someone else and is not yet confirmed; ask again",
                request.authorization.from_,
                transaction=settled.tx_hash,
            )
        return receipt

    async def settled(self, request: PaymentRequest, deadline: float) -> Receipt | SettleResponse | None:
        """The receipt, at the configured depth, of a transaction that used this authorization to pay the
        payee; a pending answer naming it while it is not that deep; None if there is none."""
        settled = await self.find(request, deadline)
        if settled is None:
            return None
        return await self.confirmed(request, settled, deadline)

    async def mined_since(self, settled: ThirdPartySettlement, presented_at: int, deadline: float) -> bool:
        """Whether `settled`'s block is stamped no earlier than `presented_at`, less the allowed skew.

        Raises:
            ChainError: the block could not be read within the budget.
        """
        block = await read_within(self._rpc.call("eth_getBlockByHash", settled.block_hash, False), deadline)
        # A block reorganised away since dates nothing: the refusal is the safe answer.
        return block is not None and int(block["timestamp"], 16) >= presented_at - PRESENTED_SKEW_S

    async def record_if_settled(self, claim: Claim, deadline: float | None = None) -> SettleResponse | None:
        """Success, if the authorization was used by another transaction that paid the payee (front-running).

        When someone beat our transaction to the authorization, ours reverts, but the payer did pay: the
        settlement is theirs. The claim proves the payment was presented here before that, so the
        transaction's age is not checked. The search keeps to the `deadline`.

        Raises:
            ChainError: the chain could not tell within the budget.
        """
        settled = await read_within(self._recovery.settlement_of(claim), deadline)
        if settled is None:
            return None
        logger.info("claim %s was settled by another transaction, %s", claim.id, settled.tx_hash)
        return await self._records.success(claim, settled.tx_hash, settled.block_number, settled.block_hash)
