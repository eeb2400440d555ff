"""A verified `upto` payment whose relayer key another facilitator process holds just now: asked again, and
never failed while its authorization is valid.

An `upto` payer's witness names the one relayer key that may send its settlement: the `/supported` address
the merchant read once (`_upto`), one of the facilitator's keys. A facilitator whose keys are leased among
its processes (replicas; a restarted process, until the stopped one's lease runs out) refuses the settle at
a process that does not hold that key now with `upto_facilitator_mismatch`, nothing claimed or sent. The
payment was verified against the facilitator's addresses before the work, so the refusal is nobody's
mistake, and it passes: the paid turn asks again within its settlement timeout (behind a load balancer
another process may answer), then leaves the offer settling and the task working; recovery asks again at
each pass while the authorization is valid, with the same idempotency key. Once the authorization has
expired unused, the facilitator refuses it as expired and recovery fails the task: nothing was charged,
nothing is booked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from a2a_x402.facilitator.wire import Reason, SettleResponse

from ._signed import SignedPayment, valid_before

__all__ = ["KEY_ELSEWHERE_TEXT", "key_held_elsewhere", "settle_where_held"]

KEY_ELSEWHERE_TEXT = (
    "The settlement waits for the facilitator process that holds the relayer key this payment names; it is "
    "asked for again until the authorization expires, and the task completes or fails then."
)
"""What the task says while its settlement waits for the process holding its key."""

_FIRST_PAUSE_S = 0.25
_MAX_PAUSE_S = 2.0


def key_held_elsewhere(response: SettleResponse, payment: SignedPayment) -> bool:
    """Whether a verified `upto` payment was refused settlement only because the facilitator process
    answering does not hold the relayer key its witness names just now: worth asking again while the
    payment is valid."""
    return response.error_reason == Reason.UPTO_FACILITATOR_MISMATCH and valid_before(payment) > time.time()


async def settle_where_held(
    settle: Callable[[], Awaitable[SettleResponse]],
    payment: SignedPayment,
    first: SettleResponse,
    *,
    within_s: float,
) -> SettleResponse:
    """`first`, or, while the answer is `key_held_elsewhere`, `settle`'s answer asked again after growing
    pauses, for as long as `within_s` allows: the last answer."""
    response = first
    deadline = time.monotonic() + within_s
    pause = _FIRST_PAUSE_S
    while key_held_elsewhere(response, payment) and time.monotonic() + pause < deadline:
        await asyncio.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_S)
        response = await settle()
    return response
