"""Accounting for a relayer key's transactions when its lease is taken over from a vanished holder."""

from __future__ import annotations

import logging
import time

from ._claims import ClaimState, ClaimStore
from ._errors import RpcError
from ._outcome import Outcomes
from ._relayer import Relayer
from ._replacement import FeeBumper
from ._rpc import RpcCall, RpcClient
from .wire import Reason

__all__ = ["account_for_key"]

logger = logging.getLogger(__name__)

# How long accounting waits for each left-behind claim's receipt per round (the pool retries rounds).
_CLAIM_WAIT_S = 1.0


async def account_for_key(
    relayer: Relayer, *, rpc: RpcClient, claims: ClaimStore, outcomes: Outcomes, bumper: FeeBumper
) -> bool:
    """Whether every transaction the earlier holder sent with `relayer`'s key is accounted for.

    Each claim it left broadcast with this key is revived if its transaction left the pool (the same
    signed bytes, the same nonce), watched for fee bumps, and recorded once mined; and the node is asked
    whether it still holds any of the key's nonces unmined. Only when every such claim has its outcome and
    no nonce is left in the pool may new sends start, at the chain's next nonce, so they can neither collide
    with nor queue behind the earlier holder's.
    """
    finished = True
    for claim in await claims.unfinished():
        if claim.relayer != relayer.address or claim.state is not ClaimState.BROADCAST or not claim.raw_tx:
            continue
        bumper.adopt(relayer, claim.raw_tx, claim.id)
        answer = await outcomes.wait(claim, time.monotonic() + _CLAIM_WAIT_S, bounded_revive=False)
        still_pending = answer.error_reason == Reason.SETTLEMENT_PENDING
        finished = finished and not still_pending
        outcome = (
            "pending" if still_pending else answer.transaction if answer.success else answer.error_reason
        )
        logger.info("relayer %s: left-behind claim %s: %s", relayer.address, claim.id, outcome)
    pending, latest = await rpc.batch(
        [
            RpcCall("eth_getTransactionCount", [relayer.address, "pending"]),
            RpcCall("eth_getTransactionCount", [relayer.address, "latest"]),
        ]
    )
    if isinstance(pending, RpcError):
        raise pending
    if isinstance(latest, RpcError):
        raise latest
    return finished and int(pending, 16) == int(latest, 16)
