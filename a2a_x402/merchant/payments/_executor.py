"""The payment layer: the x402 extension's state machine around any a2a-sdk `AgentExecutor`.

A priced request is answered with `TASK_STATE_INPUT_REQUIRED` and the terms; the terms are stored with
the task. When the client submits a signed payment for them the layer verifies it (`payment-verified`,
`TASK_STATE_WORKING`), runs the wrapped executor while holding back its artifacts, settles, books the
settlement in the tenant's ledger, and only then delivers: the artifacts and `TASK_STATE_COMPLETED` with
`payment-completed` and the receipts. The payer is never charged for work that failed (no settlement is
attempted), and the artifacts are never delivered unless the settlement succeeded.

Failures: a payment that can succeed if retried (expired, insufficient funds) gets fresh terms and the
task returns to `TASK_STATE_INPUT_REQUIRED` (`payment-required` with the error); any other failure ends
the task in `TASK_STATE_FAILED` (`payment-failed`). A client's `payment-rejected` cancels the task. A
settlement still unconfirmed at the deadline leaves the task `TASK_STATE_WORKING` with the pending
receipt (its transaction hash), and the task completes when the settlement does. A facilitator that
cannot be reached is a failed verification (nothing was sent); at settlement its outcome is unknown, so
the task stays working and the reconciler settles it with the same idempotency key once it answers. So does
an `upto` settlement refused because another facilitator process holds its relayer key now (`_key_elsewhere`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Message, TaskArtifactUpdateEvent, TaskState
from a2a.utils.errors import ExtensionSupportRequiredError
from google.protobuf.json_format import MessageToDict

from a2a_x402.extension import (
    RETRYABLE_ERROR_CODES,
    Dialect,
    PaymentCompletedData,
    PaymentData,
    PaymentErrorCode,
    PaymentFailedData,
    PaymentRejectedData,
    PaymentRequiredData,
    PaymentSubmittedData,
    PaymentVerifiedData,
    error_code_for_reason,
    negotiate_dialect,
)
from a2a_x402.facilitator import ChainUnavailableError, FacilitatorClient, RpcClient
from a2a_x402.facilitator.wire import (
    PaymentRequired,
    PaymentRequirements,
    Reason,
    VerifyResponse,
    signer_of,
)
from a2a_x402.observability import log_context

from ..ap2 import Ap2EvidenceStore
from ..ledger import Ledger
from ..tenants import tenant_name
from ..webhooks import EventType
from ._booking import record_paid, settlement_event
from ._checkouts import Checkouts, checkout_artifact
from ._held import WorkOutcome
from ._key_elsewhere import key_held_elsewhere
from ._layer import refuse_without_layer
from ._mandates_v02 import CartMandates
from ._metered import UPTO, settled_requirements, settled_text
from ._offer_table import Offer, OfferState
from ._offers import OfferStore
from ._outcomes import OutcomeListener, PaymentOutcome, end_ap2_round, failure_text, log_unpaid
from ._pricing import Pricing
from ._protocol import protocol_version
from ._refusals import one_line
from ._settling import Settler
from ._signed import SignedPayment
from ._turn import checked_of, message_dict, run_paid_work, turn_ids
from ._unpaid import RESERVATION_KEY, UnpaidWork, caller_of
from ._wire import agent_status, match_offer, message_payment_data, payload_hash, terms_for

__all__ = ["PaymentExecutor", "SkillResolver"]

logger = logging.getLogger(__name__)

SkillResolver = Callable[[Message], str]
"""Which skill (its `AgentSkill` id) a message asks for; the price is looked up by it."""


class PaymentExecutor(AgentExecutor):
    """Charges for the skills of `delegate` per tenant, settling through `facilitator` into `ledger`."""

    def __init__(
        self,
        delegate: AgentExecutor,
        *,
        pricing: Pricing,
        facilitator: FacilitatorClient,
        offers: OfferStore,
        ledger: Ledger,
        chain: RpcClient,
        skill_of: SkillResolver,
        settle_timeout_s: float = 15.0,
        settle_horizon_s: float = 900.0,
        on_outcome: OutcomeListener | None = None,
        unpaid: UnpaidWork | None = None,
        checkouts: Checkouts | None = None,
        carts: CartMandates | None = None,
        evidence: Ap2EvidenceStore | None = None,
    ):
        self._delegate = delegate
        self._pricing = pricing
        self._facilitator = facilitator
        self._offers = offers
        self._ledger = ledger
        self._chain = chain
        self._skill_of = skill_of
        self._settler = Settler(facilitator, offers, timeout_s=settle_timeout_s, horizon_s=settle_horizon_s)
        self._on_outcome = on_outcome
        self._unpaid = unpaid
        self._checkouts = checkouts if checkouts is not None else Checkouts(pricing)
        self._carts = carts
        self._evidence = evidence  # a round's AP2 receipts join its evidence (§20.6)

    @property
    def settle_timeout_s(self) -> float:
        """How long a payment turn waits for its settlement before answering with the task still working."""
        return self._settler.timeout_s

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run one turn of a task: ask for payment, take it, or run free work; without the payment layer
        around it (`PaymentLayerMissingError`), fail the task and charge nothing."""
        with log_context(task_id=context.task_id, tenant=tenant_name(context.tenant)):
            if await refuse_without_layer(context, event_queue):
                return
            await self._execute(context, event_queue)

    async def _execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        dialect = negotiate_dialect(context.requested_extensions, protocol_version(context.call_context))
        checked = checked_of(context)
        # A payment's message reaches the task without its signature: the payment comes as it was checked.
        data: PaymentData | None = (
            checked.payment if checked is not None and checked.offer.task_id == context.task_id else None
        )
        if data is None and dialect is not None:
            data = message_payment_data(context.message, dialect)
        if isinstance(data, PaymentSubmittedData) and dialect is not None:
            await self._take_payment(context, event_queue, data, dialect)
            return
        if isinstance(data, PaymentRejectedData) and dialect is not None:
            await self._reject(context, event_queue, dialect)
            return
        skill = self._skill_of(context.message or Message())
        if self._pricing.price(context.tenant, skill) == 0:
            await self._delegate.execute(context, event_queue)
            return
        if dialect is None:
            raise ExtensionSupportRequiredError(
                message="this skill is paid: activate the x402 payment extension"
            )
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await self._offer_terms(context, event_queue, skill, dialect, error=None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the wrapped work; a task whose payment is being taken is not cancelable (edge-enforced)."""
        await self._delegate.cancel(context, event_queue)

    # -- asking ---------------------------------------------------------------------------------------

    async def _offer_terms(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        skill: str,
        dialect: Dialect,
        *,
        error: PaymentErrorCode | None,
        request: dict[str, Any] | None = None,
        ended: int = 0,
    ) -> None:
        """Offer new terms; with the `error` that ended round `ended`, they end it (fresh terms)."""
        task_id, context_id = turn_ids(context)
        amount = self._pricing.amount_text(context.tenant, skill)
        required = self._pricing.terms(
            context.tenant,
            skill,
            description=f"{skill} for {amount}",
            offer_id=uuid.uuid4().hex,
            # Known by now: the request handler refused the task's first request without it.
            facilitator_address=await self._pricing.facilitator_address(context.tenant, skill),
            extensions=await self._pricing.extensions(context.tenant, skill),
        )
        checkout = self._checkouts.sign(context.tenant, skill, required, dialect)
        pay_to = self._pricing.pay_to(context.tenant)
        text = f"Payment required: {amount} to {pay_to}."
        if error is not None:
            text = f"The payment was not taken ({error.value}); here are fresh terms. {text}"
        terms = terms_for(required, dialect, mime_type=self._pricing.mime_type(skill), reason=text)
        cart = self._carts.offer(context.tenant, skill, required, terms, dialect) if self._carts else None
        offered = await self._offers.offer(
            task_id=task_id,
            tenant=context.tenant,
            context_id=context_id,
            skill=skill,
            dialect=dialect.value,
            required=required.to_json_dict(),
            request=request if request is not None else message_dict(context.message),
            checkout_jwt=checkout if cart is None else cart.stored,
        )
        if not offered:
            # Another request took a payment for this task meanwhile: its turn tells the task what happens.
            return
        if self._unpaid is not None:
            call_context = context.call_context
            # The place `admit` took for this request, taken once: terms offered again take none.
            reservation = call_context.state.pop(RESERVATION_KEY, None) if call_context else None
            await self._unpaid.note(
                task_id,
                context.tenant,
                caller_of(call_context),
                reservation=reservation if isinstance(reservation, str) else None,
            )
        data = PaymentRequiredData(required=terms, error=error)
        if checkout is not None:  # the checkout goes before the status that offers its terms (§20.3)
            await event_queue.enqueue_event(checkout_artifact(task_id, context_id, checkout))
        status = agent_status(task_id, context_id, TaskState.TASK_STATE_INPUT_REQUIRED, text, data, dialect)
        if cart is not None:  # v0.2's embedded flow (§20.7): the terms are in the cart, not the status
            await event_queue.enqueue_event(cart.artifact(task_id, context_id))
            status = cart.without_terms(status)
        if error is not None:  # fresh terms end the round whose payment failed (T4, T11)
            await end_ap2_round(status, context, self._pricing.tenants, self._evidence, ended, error=error)
        await event_queue.enqueue_event(status)

    async def _reject(self, context: RequestContext, event_queue: EventQueue, dialect: Dialect) -> None:
        task_id, context_id = turn_ids(context)
        if not await self._offers.advance(task_id, OfferState.REJECTED):
            # The payment was taken first (or the task canceled): the rejection changes nothing, and the
            # client is answered with the task as it stands.
            return
        await event_queue.enqueue_event(
            agent_status(
                task_id,
                context_id,
                TaskState.TASK_STATE_CANCELED,
                "Payment declined; the task is canceled.",
                PaymentRejectedData(),
                dialect,
            )
        )

    # -- taking a payment -----------------------------------------------------------------------------

    async def _take_payment(
        self, context: RequestContext, event_queue: EventQueue, data: PaymentSubmittedData, dialect: Dialect
    ) -> None:
        task_id, context_id = turn_ids(context)
        # The offer as the request handler read it for this request, else as stored. Reusing it is safe:
        # taking the payment (`OfferStore.submit`) succeeds only for the round and state read here.
        checked = checked_of(context)
        read = checked.offer if checked is not None and checked.offer.task_id == task_id else None
        offer = read if read is not None else await self._offers.get(task_id)
        if offer is None or offer.state is not OfferState.OFFERED:
            # A re-presented payment (a client retry) while the first is being taken: nothing to add.
            return
        offered = PaymentRequired.from_wire(offer.required)
        matched = match_offer(data.payload, offered)
        if matched is None:
            return  # the edge's gate refuses such messages before they reach the task
        payload, requirements = matched
        signer = signer_of(payload)
        taken_at = await self._offers.submit(
            task_id,
            round_=offer.round,
            payer=signer.payer,
            nonce=signer.nonce,
            payload=payload.to_json_dict(),
            payload_hash=payload_hash(payload),
            accepted=requirements.to_json_dict(),
        )
        if taken_at is None:
            return
        try:
            verification = await self._facilitator.verify(payload, requirements)
        except ChainUnavailableError as exc:
            # Nothing was verified, settled or sent: answered as the in-process facilitator answers a chain
            # it cannot reach (a failed verification, one WARNING line), never as an internal error. The
            # client is not told why: the message may hold the facilitator's address or its answer.
            logger.debug("verify for task %s: %s", task_id, exc)
            verification = VerifyResponse(is_valid=False, invalid_reason=Reason.UNEXPECTED_VERIFY_ERROR)
        if not verification.is_valid:
            reason = verification.invalid_reason or Reason.UNEXPECTED_VERIFY_ERROR
            code = error_code_for_reason(reason, verification.invalid_message)
            await self._fail(
                context,
                event_queue,
                offer,
                dialect,
                code,
                failure_text("Payment verification", code, reason, verification.invalid_message),
                (),
                reason=reason,
                said=verification.invalid_message,
            )
            return
        await event_queue.enqueue_event(
            agent_status(
                task_id,
                context_id,
                TaskState.TASK_STATE_WORKING,
                "Payment verified; working.",
                PaymentVerifiedData(),
                dialect,
            )
        )
        # A metered payment is verified for its maximum; its work then reports what it used.
        maximum = requirements.amount if requirements.scheme == UPTO else None
        outcome = await run_paid_work(self._delegate, context, event_queue, offer, maximum=maximum)
        if not outcome.completed:
            await self._fail(
                context,
                event_queue,
                offer,
                dialect,
                PaymentErrorCode.SETTLEMENT_FAILED,
                "The work could not be completed, so the payment was not settled: nothing was charged.",
                (),
            )
            return
        held = [MessageToDict(a) for a in outcome.artifacts]
        usage = outcome.usage.to_wire() if outcome.usage is not None else None
        # The usage is stored before anything is settled: a settlement recovery finishes asks for the same.
        if not await self._offers.advance(task_id, OfferState.SETTLING, held_artifacts=held, usage=usage):
            # Someone else decided this payment meanwhile (recovery took the turn for orphaned): never
            # settle what is no longer ours to settle.
            logger.warning("task %s: its payment was decided elsewhere during the work", task_id)
            return
        try:
            settling = settled_requirements(requirements, outcome.usage)
            await self._settle_and_deliver(
                context, event_queue, offer, dialect, data, payload, settling, outcome, taken_at
            )
        except ChainUnavailableError as exc:
            # The settlement may have been sent before the facilitator went silent: the task stays working
            # (T9, its outcome not known yet) and the reconciler settles it with the same idempotency key,
            # or fails it, once the facilitator answers again. Never settled twice, never failed here.
            logger.warning("settling task %s: %s; the reconciler will finish it", task_id, exc)
            await self._settler.tell_outcome_unknown(event_queue, task_id, context_id, data, dialect)
        except Exception:  # noqa: BLE001 - past this point the payer may be charged: never fail the task
            # A database or facilitator fault after the payment was taken must not end the task as failed
            # (the payer may well be charged): it stays working, and the reconciler, which finds the offer
            # settling and untouched, settles or fails it for good and delivers the held artifacts.
            logger.exception("settling task %s was interrupted; the reconciler will finish it", task_id)

    async def _settle_and_deliver(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        offer: Offer,
        dialect: Dialect,
        data: PaymentSubmittedData,
        payload: SignedPayment,
        requirements: PaymentRequirements,
        outcome: WorkOutcome,
        taken_at: datetime,
    ) -> None:
        task_id, context_id = turn_ids(context)
        response, receipts = await self._settler.settle(
            event_queue, task_id, context_id, offer, dialect, data, payload, requirements, taken_at
        )
        if key_held_elsewhere(response, payload):
            await self._settler.leave_to_recovery(event_queue, task_id, context_id, data, dialect, response)
            return
        if not response.success:
            reason = response.error_reason or Reason.UNEXPECTED_SETTLE_ERROR
            code = error_code_for_reason(reason, response.error_message)
            await self._fail(
                context,
                event_queue,
                offer,
                dialect,
                code,
                failure_text("Settlement", code, reason, response.error_message),
                tuple(receipts),
                reason=reason,
                event=settlement_event(EventType.SETTLEMENT_FAILED, offer, requirements, payload, response),
                said=response.error_message,
            )
            return
        stored = [r.to_json_dict() for r in receipts]
        await record_paid(
            self._ledger, self._chain, self._offers, offer, payload, requirements, response, stored
        )
        for artifact in outcome.artifacts:
            await event_queue.enqueue_event(
                TaskArtifactUpdateEvent(
                    task_id=task_id, context_id=context_id, artifact=artifact, last_chunk=True
                )
            )
        self._tell(context.tenant, PaymentOutcome.SETTLED)
        completed = PaymentCompletedData(receipts=tuple(receipts), usage=outcome.usage)
        status = agent_status(
            task_id,
            context_id,
            TaskState.TASK_STATE_COMPLETED,
            settled_text(response.transaction),
            completed,
            dialect,
        )
        await end_ap2_round(
            status,
            context,
            self._pricing.tenants,
            self._evidence,
            offer.round,
            transaction=response.transaction,
            network=requirements.network,
        )
        await event_queue.enqueue_event(status)

    async def _fail(
        self,
        context: RequestContext,
        event_queue: EventQueue,
        offer: Offer,
        dialect: Dialect,
        error: PaymentErrorCode,
        text: str,
        receipts: tuple[Any, ...],
        *,
        reason: str | None = None,
        event: tuple[EventType, dict[str, Any]] | None = None,
        said: str | None = None,
    ) -> None:
        """Fail or refuse the payment with `text` to the client; the log line keeps what the facilitator
        `said` (its free text, which never reaches the client) with its `reason`."""
        task_id, context_id = turn_ids(context)
        stored = [r.to_json_dict() for r in receipts]
        outcome = PaymentOutcome.REFUSED if error in RETRYABLE_ERROR_CODES else PaymentOutcome.FAILED
        log_unpaid(task_id, context.tenant, outcome, error.value, reason, one_line(said) if said else text)
        self._tell(context.tenant, outcome)
        if outcome is PaymentOutcome.REFUSED:
            if not await self._offers.advance(
                task_id, OfferState.OFFERED, receipts=stored, error=error.value, event=event
            ):
                return  # decided elsewhere meanwhile: its decider tells the task
            await self._offer_terms(
                context,
                event_queue,
                offer.skill,
                dialect,
                error=error,
                request=offer.request,
                ended=offer.round,
            )
            return
        if not await self._offers.advance(
            task_id, OfferState.FAILED, receipts=stored, error=error.value, event=event
        ):
            return  # decided elsewhere meanwhile: its decider tells the task
        failed = PaymentFailedData(error=error, receipts=receipts)
        status = agent_status(task_id, context_id, TaskState.TASK_STATE_FAILED, text, failed, dialect)
        await end_ap2_round(status, context, self._pricing.tenants, self._evidence, offer.round, error=error)
        await event_queue.enqueue_event(status)

    def _tell(self, tenant: str, outcome: PaymentOutcome) -> None:
        if self._on_outcome is not None:
            self._on_outcome(tenant_name(tenant), outcome)
