"""A settlement whose idempotency key the facilitator refused as used for another payment (HTTP 409).

The refusal is an answer, never a reason to wait: the facilitator is asked what it knows of this
payment's authorization, and that is the answer if it knows it (settled, pending or failed under whatever
key). If it never saw it, nothing was claimed or sent for it: the settlement failed, nothing was charged.
"""

from __future__ import annotations

import logging

from facilitator import FacilitatorClient
from facilitator.wire import PaymentPayload, PaymentRequirements, Reason, SettleResponse

__all__ = ["CONFLICT_MESSAGE", "answer_conflict"]

logger = logging.getLogger(__name__)

CONFLICT_MESSAGE = (
    "the facilitator refused this settlement's idempotency key as used for another payment; "
    "this payment was not settled and nothing was charged"
)


async def answer_conflict(
    facilitator: FacilitatorClient, payload: PaymentPayload, requirements: PaymentRequirements, task_id: str
) -> SettleResponse:
    """The answer to a settle of `task_id` refused with an idempotency conflict (see the module docstring).

    Raises:
        ChainUnavailableError: the facilitator could not say what it knows of the authorization.
    """
    known = await facilitator.settlement_status(payload, requirements, timeout_s=1.0)
    if known is not None:
        logger.warning("settling task %s: idempotency key refused; answered by the payment's claim", task_id)
        return known
    logger.warning("settling task %s: idempotency key refused, payment never claimed: failed", task_id)
    return SettleResponse(
        success=False,
        error_reason=Reason.INVALID_PAYLOAD,
        error_message=CONFLICT_MESSAGE,
        payer=payload.payload.authorization.from_address,
        transaction="",
        network=requirements.network,
    )
