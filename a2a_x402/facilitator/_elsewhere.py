"""Someone else's settlement: finding a transaction that used an authorization to pay the payee.

Anyone holding a signed EIP-3009 authorization, or an `exact` Permit2 witness transfer, may submit it (spec
§15.6). When someone did, the payer paid the payee exactly once, but from the chain alone that transaction
cannot be told apart from another deployment's settlement of the same authorization for its own purchase
(the payer may have presented it to both, and may have submitted it itself). So a transaction this
facilitator did not send (none of its relayer keys did) counts as a settlement only when the operator
declared that every deployment paying to the same payTo shares this claim store (`count_foreign`): the
(payer, nonce) claim is then unique across them, and only its holder may count the transaction. Otherwise it
is refused as a used nonce, naming the transaction, and nothing is delivered for it here. Every search keeps
to the caller's deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ._answers import Answers, read_within, remaining
from ._claims import Claim, ClaimState
from ._errors import ChainError
from ._found import ThirdPartySettlement, find_use
from ._nonce_state import nonce_used_reason
from ._presented import Presented
from ._receipts import Receipt, ReceiptWatcher
from ._records import ClaimRecords
from ._recovery import Recovery
from ._rpc import RpcClient
from .wire import Reason, SettleResponse

__all__ = ["SettledElsewhere"]

logger = logging.getLogger(__name__)

# Someone else's transaction counts as the settlement of a payment only if it was mined after the caller
# took the payment; block timestamps and the caller's clock may disagree by this much (a rollup stamps a
# block with the start of its slot, and hosts' clocks drift).
PRESENTED_SKEW_S = 5

FOREIGN = (
    "the authorization was already used on chain by another transaction, which this facilitator did not "
    "send; it is not counted as this settlement"
)


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
        relayers: Iterable[str],
        count_foreign: bool,
    ):
        self._rpc = rpc
        self._recovery = recovery
        self._watcher = watcher
        self._records = records
        self._answers = answers
        self._confirmations = confirmations
        self._relayers = frozenset(relayers)
        self._count_foreign = count_foreign

    @property
    def count_foreign(self) -> bool:
        """Whether a transaction this facilitator did not send may count as a settlement (the operator
        declared this claim store the only one for its payTo addresses)."""
        return self._count_foreign

    def counted(self, settled: ThirdPartySettlement, claim: Claim | None) -> bool:
        """Whether `settled` may count as the settlement of `claim` (None: nothing was claimed here).

        A transaction from one of our relayer keys is ours when a claim here may have sent it (a crash
        between sending and recording it, a replacement, a re-sent one); with no claim here, nothing here
        sent it, whoever the sender.
        """
        ours = claim is not None and settled.sender in self._relayers
        return ours or self._count_foreign

    def foreign(self, payer: str, settled: ThirdPartySettlement, reason: Reason) -> SettleResponse:
        """The refusal of an authorization a transaction not counted here used (`reason`: its method's
        word for a used nonce)."""
        return self._answers.used_elsewhere(payer, settled, reason=reason, message=FOREIGN)

    async def record(self, claim: Claim, settled: ThirdPartySettlement) -> SettleResponse:
        """Record what `settled`, a mined transaction that used the claim's authorization to pay the payee,
        means for the claim: its success if it counts (`counted`), otherwise its failure naming it."""
        if self.counted(settled, claim):
            logger.info("claim %s was settled by another transaction, %s", claim.id, settled.tx_hash)
            return await self._records.success(
                claim, settled.tx_hash, settled.block_number, settled.block_hash
            )
        logger.warning(
            "claim %s: its authorization was used by %s, sent by %s, not by this facilitator: not counted",
            claim.id,
            settled.tx_hash,
            settled.sender,
        )
        reason = nonce_used_reason(claim.asset)
        refused = self.foreign(claim.payer, settled, reason)
        return await self._records.record(claim, refused, state=ClaimState.FAILED, error_reason=reason.value)

    async def find(self, presented: Presented, deadline: float) -> ThirdPartySettlement | None:
        """The mined transaction that used this authorization to pay the payee, looked for within the
        caller's budget; None if there is none, or if the chain could not tell in time."""
        try:
            return await read_within(
                find_use(
                    self._rpc,
                    presented.key,
                    token=presented.token,
                    pay_to=presented.pay_to,
                    amount=presented.amount,
                ),
                deadline,
            )
        except ChainError as exc:
            logger.warning("settle could not look for a front-running transaction: %s", exc)
            return None

    async def confirmed(
        self, payer: str, settled: ThirdPartySettlement, deadline: float
    ) -> Receipt | SettleResponse:
        """`settled`'s receipt at the configured depth, or a pending answer naming it until then (to
        `payer`)."""
        receipt = await self._watcher.wait(
            settled.tx_hash, confirmations=self._confirmations, timeout_s=remaining(deadline)
        )
        if receipt is None:
            # Not deep enough yet: nothing is recorded, so asking again finds it once it is.
            return self._answers.failure(
                Reason.SETTLEMENT_PENDING,
                "the payment was submitted by someone else and is not yet confirmed; ask again",
                payer,
                transaction=settled.tx_hash,
            )
        return receipt

    async def settled(
        self, presented: Presented, claim: Claim, deadline: float
    ) -> Receipt | SettleResponse | None:
        """The receipt, at the configured depth, of a transaction that used this authorization to pay the
        payee, if it may count as the settlement of the released `claim` (`counted`); a pending answer
        naming it while it is not that deep; its refusal if it may not count; None if there is none."""
        settled = await self.find(presented, deadline)
        if settled is None:
            return None
        if not self.counted(settled, claim):
            return self.foreign(presented.payer, settled, presented.nonce_used)
        return await self.confirmed(presented.payer, settled, deadline)

    async def mined_since(self, settled: ThirdPartySettlement, presented_at: int, deadline: float) -> bool:
        """Whether `settled`'s block is stamped no earlier than `presented_at`, less the allowed skew.

        Raises:
            ChainError: the block could not be read within the budget.
        """
        block = await read_within(self._rpc.call("eth_getBlockByHash", settled.block_hash, False), deadline)
        # A block reorganised away since dates nothing: the refusal is the safe answer.
        return block is not None and int(block["timestamp"], 16) >= presented_at - PRESENTED_SKEW_S

    async def record_if_settled(self, claim: Claim, deadline: float | None = None) -> SettleResponse | None:
        """The recorded answer, if the authorization was used by another transaction that paid the payee
        (`record`): success if it counts, its refusal if not; None if there is no such transaction.

        When someone beat our transaction to the authorization, ours reverts, but the payer did pay. The
        claim proves the payment was presented here before that, so the transaction's age is not checked.
        The search keeps to the `deadline`.

        Raises:
            ChainError: the chain could not tell within the budget.
        """
        settled = await read_within(self._recovery.settlement_of(claim), deadline)
        if settled is None:
            return None
        return await self.record(claim, settled)
