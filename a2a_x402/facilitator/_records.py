"""Writing a settlement's outcome to its claim: the stored answer is the one every later call repeats."""

from __future__ import annotations

import logging
from typing import Any

from ._answers import Answers
from ._claims import Claim, ClaimState, ClaimStore
from ._errors import ChainError
from .wire import SettleResponse

__all__ = ["ClaimRecords"]

logger = logging.getLogger(__name__)


class ClaimRecords:
    """Records answers with their claims; the first answer stored wins."""

    def __init__(self, claims: ClaimStore, answers: Answers, *, confirmations: int):
        self._claims = claims
        self._answers = answers
        self._confirmations = confirmations

    async def record(self, claim: Claim, response: SettleResponse, **changes: Any) -> SettleResponse:
        """Store `response` with the claim and answer with what the claim holds (the first answer wins)."""
        document = response.to_json_dict()
        stored = await self._claims.record_response(claim.id, document, **changes)
        if stored.response is None or stored.response == document:
            return response  # ours was stored: no need to parse it back
        return SettleResponse.from_wire(stored.response)

    async def success(
        self, claim: Claim, tx_hash: str, block_number: int, block_hash: str, **changes: Any
    ) -> SettleResponse:
        """Record that `tx_hash`, mined in the given block, settled the claim."""
        success = SettleResponse(
            success=True,
            payer=claim.payer,
            transaction=tx_hash,
            network=self._answers.network,
            amount=claim.amount,
            extensions={"settlement": {"blockNumber": block_number, "confirmations": self._confirmations}},
        )
        changes.update(
            state=ClaimState.SUCCEEDED, tx_hash=tx_hash, block_number=block_number, block_hash=block_hash
        )
        return await self.record(claim, success, **changes)

    async def nothing_moved(self, claim: Claim) -> SettleResponse:
        """Record that the claim settled for 0 (an `upto` payment that used nothing): success naming no
        transaction, as x402's `upto` scheme answers it; the authorization is left to expire unused."""
        success = SettleResponse(
            success=True, payer=claim.payer, transaction="", network=self._answers.network, amount=0
        )
        return await self.record(claim, success, state=ClaimState.SUCCEEDED)

    async def undecided(
        self, claim: Claim, tx_hash: str, sent_fields: dict[str, Any], exc: ChainError
    ) -> SettleResponse:
        """Pending: what `tx_hash` reverting means could not be read in time; a later call decides it."""
        logger.warning("claim %s: cannot tell what the revert of %s means: %s", claim.id, tx_hash, exc)
        if sent_fields:
            await self._claims.mark_broadcast(claim.id, tx_hash=tx_hash, **sent_fields)
        return self._answers.pending(claim, tx_hash)
