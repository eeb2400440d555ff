"""Finishing what crashes, dropped transactions and reorgs left behind in the claim store."""

from __future__ import annotations

import logging
import time

from ._claims import ClaimState, ClaimStore
from ._elsewhere import SettledElsewhere
from ._errors import ChainError
from ._outcome import Outcomes
from ._recovery import Recovery
from ._rpc import RpcClient
from .wire import Reason

__all__ = ["reconcile_claims"]

logger = logging.getLogger(__name__)

# How long one reconcile pass waits for each broadcast claim's receipt before moving on.
_BROADCAST_WAIT_S = 0.2


async def reconcile_claims(
    *,
    rpc: RpcClient,
    claims: ClaimStore,
    outcomes: Outcomes,
    recovery: Recovery,
    elsewhere: SettledElsewhere,
    reorg_window_blocks: int,
) -> int:
    """One pass over the unfinished and recently settled claims; how many claims moved.

    Broadcast claims are awaited briefly (and revived if their transaction left the pool); claims whose
    owner vanished before broadcasting are released, or recorded as settled if their authorization was
    used meanwhile; recent successes whose transaction a reorg removed are broadcast again while their
    authorization is still unused.
    """
    moved = 0
    for claim in await claims.unfinished():
        try:
            if claim.state is ClaimState.BROADCAST:
                deadline = time.monotonic() + _BROADCAST_WAIT_S
                answer = await outcomes.wait(claim, deadline, bounded_revive=False)
                moved += answer.error_reason != Reason.SETTLEMENT_PENDING
            elif claim.lease_expired:
                if not await recovery.authorization_used(claim, "latest"):
                    await claims.release(claim.id)
                    moved += 1
                elif await elsewhere.record_if_settled(claim) is not None:
                    moved += 1
        except ChainError as exc:
            logger.warning("reconcile: claim %s: %s", claim.id, exc)
    head = int(await rpc.call("eth_blockNumber"), 16)
    for claim in await claims.succeeded_since(head - reorg_window_blocks):
        try:
            receipt = await rpc.call("eth_getTransactionReceipt", claim.tx_hash)
            if receipt is None and claim.tx_hash:
                logger.warning("claim %s: %s is no longer on chain (reorg)", claim.id, claim.tx_hash)
                await recovery.revive(claim, claim.tx_hash)
                moved += 1
        except ChainError as exc:
            logger.warning("reconcile: claim %s: %s", claim.id, exc)
    return moved
