"""The request context of one turn of a priced task: its ids, the offer and payment the request handler
checked for it, its message as an offer stores it; and the context the paid work then runs in, on the
request that was priced, its artifacts held back until the payment is settled, its usage metered when the
skill is.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Message, SendMessageRequest
from google.protobuf.json_format import MessageToDict, ParseDict

from ._held import HoldingQueue, WorkOutcome
from ._offer_table import Offer
from ._offers import CHECKED_OFFER_KEY, CheckedOffer
from ._usage import UsageMeter, metering

__all__ = ["checked_of", "message_dict", "run_paid_work", "turn_ids"]

logger = logging.getLogger(__name__)


async def run_paid_work(
    delegate: AgentExecutor,
    context: RequestContext,
    event_queue: EventQueue,
    offer: Offer,
    *,
    maximum: int | None = None,
) -> WorkOutcome:
    """Run `delegate` on the request that was priced (the offer's), holding back what it produces; with a
    `maximum` (a metered skill's) the work reports its usage on `usage_meter`, returned with the outcome."""
    task = context.current_task
    if task is None:
        raise RuntimeError("a payment turn always has a task")
    holding = HoldingQueue(event_queue, task)
    request = SendMessageRequest(tenant=context.tenant, message=ParseDict(offer.request, Message()))
    work_context = RequestContext(
        call_context=context.call_context,
        request=request,
        task_id=task.id,
        context_id=task.context_id,
        task=task,
    )
    meter = metering(work_context, maximum) if maximum is not None else nullcontext[UsageMeter | None](None)
    with meter as measuring:
        try:
            await delegate.execute(work_context, holding)
        except Exception:  # noqa: BLE001 - any failure of the work (a refused usage report too): not paid for
            logger.exception("paid work for task %s failed", task.id)
            return WorkOutcome()
    if measuring is not None:
        holding.outcome.usage = measuring.record()
    return holding.outcome


def checked_of(context: RequestContext) -> CheckedOffer | None:
    """The offer and payment the request handler checked for this request, if it carried a payment."""
    checked = context.call_context.state.get(CHECKED_OFFER_KEY) if context.call_context else None
    return checked if isinstance(checked, CheckedOffer) else None


def turn_ids(context: RequestContext) -> tuple[str, str]:
    """The task and context ids of the turn."""
    if context.task_id is None or context.context_id is None:
        raise RuntimeError("the request handler always assigns task and context ids")
    return context.task_id, context.context_id


def message_dict(message: Message | None) -> dict[str, Any]:
    """A message as the JSON an offer stores (`Offer.request`)."""
    return MessageToDict(message) if message is not None else {}
