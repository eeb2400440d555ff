"""Settling a taken payment: the stage of the payment layer between the held work and its delivery.

A settlement is asked for with the task's idempotency key, so retrying a facilitator that cannot be
reached never settles twice. A settlement still pending is told to the task (`TASK_STATE_WORKING` with the
pending receipt) and waited for, the offer kept fresh meanwhile, until it is final or the horizon passes.
An `upto` settlement refused because another facilitator process holds its relayer key is asked for again
within the settlement timeout, then left to recovery (`_key_elsewhere`).
What follows from the final answer (delivery, or failure) is the executor's.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from functools import partial
from typing import Any

import stamina
from a2a.server.events import EventQueue
from a2a.types import TaskState

from a2a_x402.extension import Dialect, PaymentSubmittedData, PaymentVerifiedData
from a2a_x402.facilitator import (
    ChainUnavailableError,
    FacilitatorAnswerError,
    FacilitatorClient,
    IdempotencyConflictError,
)
from a2a_x402.facilitator.wire import (
    PaymentRequirements,
    Reason,
    SettleResponse,
    SettleResponseV1,
)

from ..webhooks import EventType
from ._booking import settlement_event
from ._conflict import answer_unsettled as _answer_unsettled
from ._key_elsewhere import KEY_ELSEWHERE_TEXT, settle_where_held
from ._keys import SettlementKeys
from ._offer_table import Offer, OfferState
from ._offers import OfferStore
from ._refusals import one_line
from ._signed import SignedPayment
from ._wire import agent_status, receipt_for

__all__ = ["Settler"]

logger = logging.getLogger(__name__)

_UNKNOWN_TEXT = (
    "The settlement's outcome is not known yet (the facilitator could not be reached, or could not read the "
    "chain); the task completes or fails when it is."
)


class Settler:
    """Settles taken payments through `facilitator`, recording pending settlements in `offers`."""

    def __init__(
        self, facilitator: FacilitatorClient, offers: OfferStore, *, timeout_s: float, horizon_s: float
    ):
        self._facilitator = facilitator
        self._offers = offers
        self._keys = SettlementKeys(offers.engine)
        self._timeout_s = timeout_s
        self._horizon_s = horizon_s

    @property
    def timeout_s(self) -> float:
        """How long one settlement call waits for its transaction before answering pending."""
        return self._timeout_s

    async def settle(
        self,
        event_queue: EventQueue,
        task_id: str,
        context_id: str,
        offer: Offer,
        dialect: Dialect,
        data: PaymentSubmittedData,
        payload: SignedPayment,
        requirements: PaymentRequirements,
        taken_at: datetime,
    ) -> tuple[SettleResponse, list[SettleResponse | SettleResponseV1]]:
        """Settle the payment taken for `offer`; the last answer and the task's receipts, that answer's last.

        The answer is pending only if it still was when the horizon passed.

        Raises:
            ChainUnavailableError: the facilitator could not be reached, or answered pending without naming
                a transaction (it could not tell whether its send went out): the outcome is not known.
        """
        # The same key for the paid turn and for recovery: the facilitator answers a retry from its claim.
        key = await self._keys.key(offer.task_id, offer.round)
        # When the payment was taken: only a transaction mined since may settle it for someone else.
        presented_at = int(taken_at.timestamp())
        receipts = [receipt_for(SettleResponse.from_wire(r), data.payload) for r in offer.receipts]
        settle = partial(self._settle, task_id, payload, requirements, key, presented_at)
        # An `upto` key another facilitator process holds now: another may answer the next ask.
        response = await settle_where_held(settle, payload, await settle(), within_s=self._timeout_s)
        if response.error_reason == Reason.SETTLEMENT_PENDING and not response.transaction:
            # Pending, naming no transaction: the facilitator could not read its chain to tell whether its
            # send went out. A pending receipt names the transaction the client can watch (spec §6.3): with
            # none to name, the outcome is not known, as when the facilitator cannot be reached.
            raise ChainUnavailableError("the facilitator cannot tell yet whether the settlement was sent")
        if response.error_reason == Reason.SETTLEMENT_PENDING:
            receipts.append(receipt_for(response, data.payload))
            await self._offers.advance(
                task_id,
                OfferState.SETTLING,
                receipts=[r.to_json_dict() for r in receipts],
                event=settlement_event(EventType.SETTLEMENT_PENDING, offer, requirements, payload, response),
            )
            await event_queue.enqueue_event(
                agent_status(
                    task_id,
                    context_id,
                    TaskState.TASK_STATE_WORKING,
                    f"Settlement transaction {response.transaction} is waiting for confirmation.",
                    PaymentVerifiedData(receipts=tuple(receipts)),
                    dialect,
                )
            )
            deadline = time.monotonic() + self._horizon_s
            while response.error_reason == Reason.SETTLEMENT_PENDING and time.monotonic() < deadline:
                # The heartbeat tells the reconciler this settlement still has a live owner.
                await self._offers.touch(task_id)
                response = await self._settle(task_id, payload, requirements, key, presented_at)
            receipts.pop()
        receipts.append(receipt_for(response, data.payload))
        return response, receipts

    async def tell_outcome_unknown(
        self,
        event_queue: EventQueue,
        task_id: str,
        context_id: str,
        data: PaymentSubmittedData,
        dialect: Dialect,
        *,
        text: str = _UNKNOWN_TEXT,
    ) -> None:
        """Tell the client the settlement's outcome is not known yet (`text` says why), with the receipts
        stored so far; a fault doing so is only logged, as the task must stay working for the reconciler
        either way."""
        try:
            await event_queue.enqueue_event(
                agent_status(
                    task_id,
                    context_id,
                    TaskState.TASK_STATE_WORKING,
                    text,
                    PaymentVerifiedData(receipts=await self._stored_receipts(task_id, data)),
                    dialect,
                )
            )
        except Exception:  # noqa: BLE001 - the task stays working; the reconciler finishes it
            logger.exception("telling task %s its settlement is pending failed", task_id)

    async def leave_to_recovery(
        self,
        event_queue: EventQueue,
        task_id: str,
        context_id: str,
        data: PaymentSubmittedData,
        dialect: Dialect,
        response: SettleResponse,
    ) -> None:
        """Leave a settlement refused because its `upto` key is held by another facilitator process now
        (`key_held_elsewhere`) to recovery: the offer stays settling, the task working."""
        logger.warning(
            "settling task %s: %s; recovery asks again while the authorization is valid",
            task_id,
            one_line(response.error_message or str(response.error_reason)),
        )
        await self.tell_outcome_unknown(
            event_queue, task_id, context_id, data, dialect, text=KEY_ELSEWHERE_TEXT
        )

    async def _stored_receipts(self, task_id: str, data: PaymentSubmittedData) -> tuple[Any, ...]:
        """The receipts stored with the task's offer (a pending one among them, if the settlement got that
        far)."""
        offer = await self._offers.get(task_id)
        stored = offer.receipts if offer is not None else []
        return tuple(receipt_for(SettleResponse.from_wire(r), data.payload) for r in stored)

    async def _settle(
        self,
        task_id: str,
        payload: SignedPayment,
        requirements: PaymentRequirements,
        key: str,
        presented_at: int,
    ) -> SettleResponse:
        """Settle with the task's idempotency key, retrying a facilitator that cannot be reached.

        `presented_at` (when the payment was taken) lets the facilitator count a transaction that someone
        else mined since as this settlement, where foreign settlements count at all, but not an older one:
        that is a payment made elsewhere.
        """
        async for attempt in stamina.retry_context(
            on=ChainUnavailableError, attempts=10, timeout=self._horizon_s
        ):
            with attempt:
                try:
                    return await self._facilitator.settle(
                        payload,
                        requirements,
                        idempotency_key=key,
                        timeout_s=self._timeout_s,
                        presented_at=presented_at,
                    )
                except (IdempotencyConflictError, FacilitatorAnswerError) as exc:
                    # An answer, not a fault: the turn ends on what the facilitator knows of the payment.
                    return await _answer_unsettled(self._facilitator, payload, requirements, task_id, exc)
        raise RuntimeError("unreachable: stamina re-raises the last error")
