"""Finishing what crashes, dropped transactions and reorgs left behind in the claim store.

Each claim is handled on its own: whatever one claim raises (the chain unreachable, or a row that cannot be
read or acted on) is logged in one line, reported to `on_failure` and left to the next pass, so one bad row
never stops the pass for the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from ._claims import Claim, ClaimState, ClaimStore
from ._elsewhere import SettledElsewhere
from ._outcome import Outcomes
from ._recovery import Recovery
from ._rpc import RpcClient
from .wire import Reason

__all__ = ["reconcile_claims"]

logger = logging.getLogger(__name__)

# How long one reconcile pass waits for each broadcast claim's receipt before moving on.
_BROADCAST_WAIT_S = 0.2
# An exception's message is cut here: SQLAlchemy's carries the statement and its parameters on later lines.
_MESSAGE_CHARS = 200


def _line(exc: BaseException) -> str:
    """`exc` as one bounded line: its type and its message's first line, never the SQL echo after it."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:_MESSAGE_CHARS] if lines else ''}".rstrip(": ")


async def _isolated(claim: Claim, work: Awaitable[int], on_failure: Callable[[], None] | None) -> int:
    """`await work` (how many claims it moved), or 0 when it fails: logged in one line and counted."""
    try:
        return await work
    except Exception as exc:  # noqa: BLE001 - one claim must never stop the pass for the others
        logger.warning("reconcile: claim %s postponed to the next pass: %s", claim.id, _line(exc))
        if on_failure is not None:
            on_failure()
        return 0


async def reconcile_claims(
    *,
    rpc: RpcClient,
    claims: ClaimStore,
    outcomes: Outcomes,
    recovery: Recovery,
    elsewhere: SettledElsewhere,
    reorg_window_blocks: int,
    on_failure: Callable[[], None] | None = None,
) -> int:
    """One pass over the unfinished and recently settled claims; how many claims moved.

    Broadcast claims are awaited briefly (and revived if their transaction left the pool); claims whose
    owner vanished before broadcasting are released, or recorded as settled if their authorization was
    used meanwhile; recent successes whose transaction a reorg removed are broadcast again while their
    authorization is still unused. A claim that fails is logged, counted by calling `on_failure` and
    retried by the next pass.
    """

    async def unfinished(claim: Claim) -> int:
        if claim.state is ClaimState.BROADCAST:
            deadline = time.monotonic() + _BROADCAST_WAIT_S
            answer = await outcomes.wait(claim, deadline, bounded_revive=False)
            return int(answer.error_reason != Reason.SETTLEMENT_PENDING)
        if claim.lease_expired:
            if not await recovery.authorization_used(claim, "latest"):
                await claims.release(claim.id)
                return 1
            return int(await elsewhere.record_if_settled(claim) is not None)
        return 0

    async def settled(claim: Claim) -> int:
        receipt = await rpc.call("eth_getTransactionReceipt", claim.tx_hash)
        if receipt is None and claim.tx_hash:
            logger.warning("claim %s: %s is no longer on chain (reorg)", claim.id, claim.tx_hash)
            await recovery.revive(claim, claim.tx_hash)
            return 1
        return 0

    moved = 0
    for claim in await claims.unfinished():
        moved += await _isolated(claim, unfinished(claim), on_failure)
    head = int(await rpc.call("eth_blockNumber"), 16)
    for claim in await claims.succeeded_since(head - reorg_window_blocks):
        moved += await _isolated(claim, settled(claim), on_failure)
    return moved
