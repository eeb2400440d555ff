"""The mark that `PaymentExecutor` runs inside the payment layer, and its refusal to run without it.

`PaymentExecutor` alone pays and books, but a plain a2a-sdk server around it does not conform: the
extension's activation is not echoed, offers are never marked as told to the client, and the reconciler
cannot find the tasks it recovers. So the merchant's edge (which records the negotiated A2A version) and
the payment layer's request handler (which checks payments before any task changes) each leave a mark on
the call context, and the executor refuses a turn that lacks one, before any offer or charge.
"""

from __future__ import annotations

import logging

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part

from ._protocol import NEGOTIATED_VERSION_KEY

__all__ = ["PAYMENT_LAYER_KEY", "PaymentLayerMissingError", "mark_payment_layer", "refuse_without_layer"]

logger = logging.getLogger(__name__)

PAYMENT_LAYER_KEY = "x402_payment_layer"
"""The `ServerCallContext.state` key `PaymentRequestHandler` sets on every message it lets through."""
_EDGE = "the merchant's edge (version negotiation, extension echo, tenant task store)"


class PaymentLayerMissingError(RuntimeError):
    """`PaymentExecutor` runs without the payment layer around it (a plain a2a-sdk server): it refuses to
    charge. Serve the wrapped executor with `a2a_x402.merchant.paid_app` instead; the message names what is
    missing."""

    code = "payment_layer_missing"

    def __init__(self, missing: str) -> None:
        self.missing = missing
        super().__init__(
            f"PaymentExecutor runs without {missing}, so it charges nothing: serve your AgentExecutor "
            "with a2a_x402.merchant.paid_app(...) instead of wrapping it in PaymentExecutor yourself"
        )


def mark_payment_layer(context: ServerCallContext) -> None:
    """Mark `context` as having passed the payment layer's request handler."""
    context.state[PAYMENT_LAYER_KEY] = True


def missing_layer(context: ServerCallContext | None) -> PaymentLayerMissingError | None:
    """The refusal for a turn whose call context lacks the edge's or the payment handler's mark."""
    state = context.state if context is not None else {}
    missing = [
        name
        for name, key in (
            (_EDGE, NEGOTIATED_VERSION_KEY),
            ("the payment layer's request handler (PaymentRequestHandler)", PAYMENT_LAYER_KEY),
        )
        if key not in state
    ]
    return PaymentLayerMissingError(" and ".join(missing)) if missing else None


async def refuse_without_layer(context: RequestContext, event_queue: EventQueue) -> bool:
    """Fail the turn's task with the refusal (and log it once) when the payment layer is missing.

    Returns:
        Whether the turn was refused; then nothing was offered, charged or booked.
    """
    refusal = missing_layer(context.call_context)
    if refusal is None:
        return False
    logger.error("task %s refused: %s", context.task_id, refusal)
    if context.current_task is None and context.message is not None:
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
    updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
    await updater.failed(updater.new_agent_message([Part(text=str(refusal))]))
    return True
