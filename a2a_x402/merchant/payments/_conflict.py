"""A settle the facilitator answered without settling: an idempotency conflict (HTTP 409), or no x402
answer at all (a 5xx, garbage).

Such an answer ends the turn, never a wait: the facilitator is asked what it knows of this payment's
authorization (its claim, under whatever key), and that is the answer if it knows it: settled, pending
or failed. If it never claimed it, nothing was sent for it (a claim precedes every broadcast): the
settlement failed and nothing was charged.
"""

from __future__ import annotations

import logging

from a2a_x402.facilitator import FacilitatorClient, IdempotencyConflictError
from a2a_x402.facilitator.wire import PaymentRequirements, Reason, SettleResponse, payer_of

from ._signed import SignedPayment

__all__ = ["CONFLICT_MESSAGE", "UNREADABLE_MESSAGE", "answer_from_claim", "answer_unsettled"]

logger = logging.getLogger(__name__)

CONFLICT_MESSAGE = (
    "the facilitator refused this settlement's idempotency key as used for another payment; "
    "this payment was not settled and nothing was charged"
)
UNREADABLE_MESSAGE = (
    "the facilitator's answer was not an x402 answer and it holds no claim of this payment; "
    "this payment was not settled and nothing was charged"
)


async def answer_from_claim(
    facilitator: FacilitatorClient,
    payload: SignedPayment,
    requirements: PaymentRequirements,
    *,
    task_id: str,
    reason: Reason,
    message: str,
) -> SettleResponse:
    """The answer to a settle of `task_id` the facilitator did not answer (see the module docstring):
    its claim's, or a failure with `reason` and `message`.

    Raises:
        ChainUnavailableError: the facilitator could not say what it knows of the authorization.
    """
    known = await facilitator.settlement_status(payload, requirements, timeout_s=1.0)
    if known is not None:
        logger.warning("settling task %s: no answer to the settle; answered by the payment's claim", task_id)
        return known
    logger.warning("settling task %s failed: %s", task_id, message)
    return SettleResponse(
        success=False,
        error_reason=reason,
        error_message=message,
        payer=payer_of(payload),
        transaction="",
        network=requirements.network,
    )


async def answer_unsettled(
    facilitator: FacilitatorClient,
    payload: SignedPayment,
    requirements: PaymentRequirements,
    task_id: str,
    error: Exception,
) -> SettleResponse:
    """`answer_from_claim` for a settle refused as an idempotency conflict (`IdempotencyConflictError`) or
    answered with no x402 answer (`FacilitatorAnswerError`, `error`)."""
    if isinstance(error, IdempotencyConflictError):
        reason, message = Reason.INVALID_PAYLOAD, CONFLICT_MESSAGE
    else:
        reason, message = Reason.UNEXPECTED_SETTLE_ERROR, UNREADABLE_MESSAGE
    return await answer_from_claim(
        facilitator, payload, requirements, task_id=task_id, reason=reason, message=message
    )
