"""The payment layer's request handler: refuse bad payment requests before anything changes.

The executor runs inside the task's lifecycle, where an error moves the task to FAILED. Requests the
payment layer must refuse — malformed extension data, a priced skill without the extension activated, a
payment that does not match the task's terms or was already used — are refused here, before the request
reaches the task: a clear A2A error, no state change, nothing booked. A task whose payment is being taken
cannot be canceled. Extension data in the request's own metadata (not the message's) is refused too.

A blocking SendMessage that carries a payment waits for the task to finish, as A2A says, unless the
settlement is still unconfirmed at the executor's deadline: then it answers with the task as it is
(`TASK_STATE_WORKING`, the pending receipt with its transaction hash) while the executor keeps waiting
for the settlement in the background. The handler follows the task's own events to see that moment, so
the task it answers with is the stored one, pending receipt included. The same payment presented again
while it is being processed is answered the same way (at once with `returnImmediately`), with the stored
task as it stands, or as being processed (`TASK_STATE_WORKING`) while its processing has reported nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtensionSupportRequiredError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from a2a_x402.extension import (
    EXTENSION_URI,
    EXTENSION_URI_V01,
    EXTENSION_URI_V02,
    FLAT_KEY_PREFIX,
    Dialect,
    ExtensionMetadataError,
    PaymentData,
    PaymentErrorCode,
    PaymentRejectedData,
    PaymentSubmittedData,
    PaymentVerifiedData,
    negotiate_dialect,
)
from a2a_x402.facilitator.wire import PaymentRequired, signer_of

from .._handlers import DelegatingRequestHandler
from .._task_reads import forget_task_reads
from ._layer import mark_payment_layer
from ._mandates import PaymentMandates
from ._mandates_v02 import CartMandates, strip_mandate_secrets
from ._offer_table import OfferState
from ._offers import CHECKED_OFFER_KEY, CheckedOffer, OfferStore
from ._presented import Presentations
from ._pricing import Pricing
from ._protocol import protocol_version
from ._unpaid import RESERVATION_KEY, UnpaidLimitError, UnpaidWork, caller_of
from ._upto import MeteringUnavailableError
from ._wire import match_offer, message_payment_data, payload_hash, strip_signature

__all__ = ["MAX_MESSAGE_BYTES", "USED_ELSEWHERE", "PaymentRequestHandler"]

MAX_MESSAGE_BYTES = 64 * 1024
USED_ELSEWHERE = (
    f"this payment authorization was already presented for another task ({PaymentErrorCode.DUPLICATE_NONCE})"
)
"""The refusal of an authorization presented before for another task: its reason, never the payload."""
_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
# Where a blocking SendMessage answers: a terminal or an interrupted state.
_ANSWERED = _TERMINAL | {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
EXTENSION_URIS = frozenset({EXTENSION_URI, EXTENSION_URI_V02, EXTENSION_URI_V01})
# A re-presented payment reads its task (possibly taken by another replica) at growing intervals: a client
# repeating its payment must not turn into a steady load on the task store.
_PROGRESS_POLL_FIRST_S = 0.05
_PROGRESS_POLL_MAX_S = 0.5
_TAKING_PAYMENT = {OfferState.WORKING, OfferState.SETTLING}


class PaymentRequestHandler(DelegatingRequestHandler):
    """Wraps the SDK's request handler with the payment layer's checks and its pending-settlement answer."""

    def __init__(
        self,
        inner: RequestHandler,
        *,
        pricing: Pricing,
        offers: OfferStore,
        presentations: Presentations,
        skill_of: Callable[[Message], str],
        progress_timeout_s: float = 15.0,
        unpaid: UnpaidWork | None = None,
        mandates: PaymentMandates | None = None,
        carts: CartMandates | None = None,
    ):
        super().__init__(inner)
        self._carts = carts
        self._mandates = mandates
        self._unpaid = unpaid
        self._pricing = pricing
        self._offers = offers
        self._presentations = presentations
        self._skill_of = skill_of
        self._progress_timeout_s = progress_timeout_s

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        """SendMessage; a blocking payment answers early (task working) while its settlement is pending."""
        try:
            data, dialect = await self._check_send(params, context)
        except _Represented as represented:
            return await self._await_progress(params, context, represented.status_id)
        if (
            not isinstance(data, PaymentSubmittedData)
            or dialect is None
            or params.configuration.return_immediately
        ):
            async with self._place_given_back_if_refused(context):
                return await super().on_message_send(params, context)
        checked = context.state.get(CHECKED_OFFER_KEY)
        # Follow the task's events. Each one reaches a subscriber only after it is stored, so the task read
        # afterwards is at least as new as the event that ended the wait.
        # Leaving the stream only ends this caller's wait; the executor goes on in the background.
        async with aclosing(super().on_message_send_stream(params, context)) as events:
            async for event in events:
                if isinstance(event, Message):
                    return event
                if isinstance(event, Task | TaskStatusUpdateEvent) and _answers(event, dialect):
                    break
        request = GetTaskRequest(id=params.message.task_id, tenant=params.tenant)
        if params.configuration.HasField("history_length"):
            request.history_length = params.configuration.history_length
        task = await super().on_get_task(request, context)
        if task is None:
            raise TaskNotFoundError
        if isinstance(checked, CheckedOffer) and not _moved_on(task, checked.status_id):
            # This turn changed nothing: the same payment, sent twice at once, is being taken by the other
            # request. Answer as for a payment presented again, never with the stored request to pay.
            return await self._await_progress(params, context, checked.status_id)
        return task

    async def _await_progress(
        self, params: SendMessageRequest, context: ServerCallContext, seen: str
    ) -> Task:
        """Answer a payment presented again while it is being taken (a retry, or another replica's request).

        The answer is the stored task as it stands (T13 and §11 of the specification), with its status
        message and x402 metadata, and its history cut to `historyLength` as any SendMessage answer is.
        With `returnImmediately` it is read once; otherwise, as a blocking SendMessage of the payment
        would, it waits until the task is done, interrupted or pending (the pending receipt included) and
        at the deadline answers with the task as it is then. Its executor may run elsewhere, so the task
        is read, not followed, less often the longer it takes. The stored request to pay, which the
        payment answered, is never the answer: the client would take it as an invitation to pay again.
        While the processing has reported no status, the task is answered as being processed.

        Raises:
            TaskNotFoundError: the task disappeared.
        """
        request = GetTaskRequest(id=params.message.task_id, tenant=params.tenant)
        if params.configuration.HasField("history_length"):
            request.history_length = params.configuration.history_length
        dialect = self._dialect_of(context)
        loop = asyncio.get_running_loop()
        wait_s = 0.0 if params.configuration.return_immediately else self._progress_timeout_s
        deadline = loop.time() + wait_s
        pause = _PROGRESS_POLL_FIRST_S
        while True:
            # The task moves on elsewhere (another request, another replica): never a remembered read.
            forget_task_reads(context)
            task = await super().on_get_task(request, context)
            if task is None:
                raise TaskNotFoundError
            stands = _stands(task, seen)
            if stands and _answers(task, dialect):
                return task
            now = loop.time()
            if now >= deadline:
                return task if stands else _being_processed(task)
            await asyncio.sleep(min(pause, deadline - now))
            pause = min(pause * 2, _PROGRESS_POLL_MAX_S)

    def _dialect_of(self, context: ServerCallContext) -> Dialect:
        return negotiate_dialect(context.requested_extensions, protocol_version(context)) or Dialect.V03

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """SendStreamingMessage after the payment checks (the stream shows every stage).

        A payment presented again while it is being taken streams the task once it has moved on.
        """
        try:
            await self._check_send(params, context)
        except _Represented as represented:
            yield await self._await_progress(params, context, represented.status_id)
            return
        async with self._place_given_back_if_refused(context):
            async for event in super().on_message_send_stream(params, context):
                yield event

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """CancelTask; a priced task is canceled only while it awaits payment.

        The offer moves to `rejected` first, by the same compare-and-set as a payment being taken (from
        `offered` only): of a cancel and a payment racing, one wins before anything is verified. The
        loser is refused with the task's true state: a payment being taken or decided is never canceled.
        """
        offer = await self._offers.get(params.id)
        if offer is None or offer.tenant != context.tenant:
            return await super().on_cancel_task(params, context)
        # Offers are not owner-scoped: a task this caller cannot see is TaskNotFound, as for any other
        # operation, before its offer is changed or anything is said about its payment.
        if await super().on_get_task(GetTaskRequest(id=params.id, tenant=params.tenant), context) is None:
            raise TaskNotFoundError
        if offer.state is OfferState.OFFERED:
            if await self._offers.advance(offer.task_id, OfferState.REJECTED):
                return await super().on_cancel_task(params, context)
        offer = await self._offers.get(params.id) or offer
        if offer.state in _TAKING_PAYMENT:
            raise TaskNotCancelableError(
                message="the task's payment is being settled; it can no longer be canceled"
            )
        task = await super().on_get_task(GetTaskRequest(id=params.id, tenant=params.tenant), context)
        if task is None or task.status.state in _TERMINAL:
            return await super().on_cancel_task(params, context)  # the SDK's own answer for an ended task
        raise TaskNotCancelableError(
            message=f"the task's payment is {offer.state.value}; it can no longer be canceled"
        )

    async def _check_send(
        self, request: SendMessageRequest, call_context: ServerCallContext
    ) -> tuple[PaymentData | None, Dialect | None]:
        """Raise the A2A error for a message the payment layer must refuse.

        Returns:
            The message's extension data (None without any) and the dialect it was read in.
        """
        message = request.message
        mark_payment_layer(call_context)
        if message.ByteSize() > MAX_MESSAGE_BYTES:
            raise InvalidParamsError(message=f"the message is larger than {MAX_MESSAGE_BYTES} bytes")
        if request.HasField("metadata") and any(_is_extension_key(key) for key in request.metadata):
            # Read nowhere: without this refusal the payment would be dropped and the task priced again.
            raise InvalidParamsError(
                message="x402 payment data belongs in the message's metadata, not the request's"
            )
        dialect = negotiate_dialect(call_context.requested_extensions, protocol_version(call_context))
        # The v0.2 form of the embedded flow (§20.7) carries the payment in a PaymentMandate part.
        embedded = self._carts.payment_of(call_context.tenant, message, dialect) if self._carts else None
        data = embedded or self._read(message, dialect)
        if not message.task_id:
            if data is not None:
                raise InvalidParamsError(message="a payment message must name the task (taskId) it pays for")
            skill = self._skill_of(message)
            if self._pricing.price(call_context.tenant, skill) > 0:
                if dialect is None:
                    raise ExtensionSupportRequiredError(
                        message="this skill is paid: activate the x402 payment extension (A2A-Extensions)"
                    )
                await self._metered_terms_ready(call_context.tenant, skill)
                await self._admit_unpaid(call_context)
            return data, dialect
        try:
            task = await super().on_get_task(
                GetTaskRequest(id=message.task_id, tenant=request.tenant), call_context
            )
        except TaskNotFoundError:
            return data, dialect  # the SDK answers TaskNotFound itself
        if task is None or task.status.state in _TERMINAL:
            return data, dialect  # the SDK answers TaskNotFound / UnsupportedOperation itself
        if isinstance(data, PaymentSubmittedData):
            # The offer the authorization was taken for comes with the task's own, in the same read.
            presented = signer_of(data.payload)
            offer, used = await self._offers.for_payment(task.id, presented.payer, presented.nonce)
        else:
            offer, used = await self._offers.get(task.id), None
        if offer is None:
            if data is not None:
                raise InvalidParamsError(message="this task asked for no payment")
            return data, dialect
        if dialect is None:
            raise ExtensionSupportRequiredError(
                message="this task is paid: activate the x402 payment extension"
            )
        if isinstance(data, PaymentRejectedData) and offer.state is not OfferState.OFFERED:
            raise InvalidParamsError(message=f"this task is not awaiting payment (it is {offer.state.value})")
        if data is None and offer.state is not OfferState.OFFERED:
            raise UnsupportedOperationError(
                message=f"this task's payment is {offer.state.value}: it takes no other message until it ends"
            )
        if not isinstance(data, PaymentSubmittedData):
            return data, dialect
        matched = match_offer(data.payload, PaymentRequired.from_wire(offer.required))
        if matched is None:
            raise InvalidParamsError(message="the payment does not match the terms offered for this task")
        payload, _ = matched
        if used is not None and used.task_id != task.id:
            raise InvalidParamsError(message=USED_ELSEWHERE)
        if offer.state is not OfferState.OFFERED:
            if offer.payload_hash != payload_hash(payload):
                raise InvalidParamsError(
                    message=f"this task is not awaiting payment (it is {offer.state.value})"
                )
            raise _Represented(task.status.message.message_id)
        # The embedded flow's mandates (§20.5): verified first, and counted with the presentation.
        mandates = None
        if self._carts is not None and self._carts.applies(offer, embedded):  # §20.7's v0.2 form
            await self._carts.check(call_context.tenant, offer, message, embedded)
        elif self._mandates is not None:
            mandates = await self._mandates.check(
                call_context, offer, data, message, payment_hash=payload_hash(payload)
            )
        # Bound to this task before anything is verified: an authorization once presented here, whatever
        # became of it, pays no other task or tenant (a refused one stays valid on chain until it expires).
        signer = signer_of(payload)
        owner = await self._presentations.present(
            payer=signer.payer, nonce=signer.nonce, task_id=task.id, tenant=call_context.tenant, also=mandates
        )
        if owner != (task.id, call_context.tenant):
            raise InvalidParamsError(message=USED_ELSEWHERE)
        call_context.state[CHECKED_OFFER_KEY] = CheckedOffer(offer, task.status.message.message_id, data)
        # From here on the message goes into the task's history: without its signature (§11). The executor
        # takes the payment from the checked offer, and the offer row keeps it whole once it is taken.
        strip_signature(message, dialect)
        strip_mandate_secrets(message)
        return data, dialect

    @asynccontextmanager
    async def _place_given_back_if_refused(self, context: ServerCallContext) -> AsyncIterator[None]:
        """Release the unpaid-work place `_admit_unpaid` took when the request then fails before its task
        exists (the SDK refuses a part's media type, say): a refused request changes nothing."""
        try:
            yield
        except Exception:
            reservation = context.state.pop(RESERVATION_KEY, None)
            if reservation is not None and self._unpaid is not None:
                await self._unpaid.release(reservation)
            raise

    async def _metered_terms_ready(self, tenant: str, skill: str) -> None:
        """Refuse a metered skill's new task, before any task, while its `upto` terms cannot be made.

        Raises:
            UnsupportedOperationError: the facilitator settles no `upto` payments on the network, or cannot be
                asked now.
        """
        try:
            await self._pricing.facilitator_address(tenant, skill)
        except MeteringUnavailableError as exc:
            raise UnsupportedOperationError(
                message=f"the skill {skill!r} is metered, but {exc}: it cannot be paid for now"
            ) from None

    async def _admit_unpaid(self, call_context: ServerCallContext) -> None:
        """Refuse a new priced task to a caller over its bounds on unpaid work (`_unpaid`), before any task.

        Raises:
            UnsupportedOperationError: the caller has too many tasks awaiting payment, or started too many.
        """
        if self._unpaid is None:
            return
        try:
            reservation = await self._unpaid.admit(call_context.tenant, caller_of(call_context))
        except UnpaidLimitError as refused:
            raise UnsupportedOperationError(message=str(refused)) from None
        call_context.state[RESERVATION_KEY] = reservation

    def _read(self, message: Message, dialect: Dialect | None) -> PaymentData | None:
        """The message's extension data; extension data without the extension activated is refused."""
        if dialect is None:
            keys = message.metadata.keys() if message.HasField("metadata") else ()
            if any(_is_extension_key(key) for key in keys):
                raise ExtensionSupportRequiredError(
                    message="the message carries x402 payment data but the extension is not activated"
                )
            return None
        try:
            return message_payment_data(message, dialect)
        except ExtensionMetadataError as exc:
            raise InvalidParamsError(message=f"malformed x402 extension metadata: {exc}") from None


class _Represented(Exception):  # noqa: N818 - a signal between two methods, not an error
    """The payment was already presented for this task and is being taken."""

    def __init__(self, status_id: str) -> None:
        super().__init__(status_id)
        self.status_id = status_id


def _moved_on(task: Task, seen: str) -> bool:
    """Whether the task has moved on since status message `seen`: it ended, or the agent said something.

    A status without a message is the SDK's own mark that a client message arrived, not an answer.
    """
    if task.status.state in _TERMINAL:
        return True
    return task.status.HasField("message") and task.status.message.message_id != seen


def _is_extension_key(key: str) -> bool:
    """Whether a metadata key holds x402 extension data (of any version)."""
    return key in EXTENSION_URIS or key.startswith(FLAT_KEY_PREFIX)


def _stands(task: Task, seen: str) -> bool:
    """Whether `task` says how a payment presented against status message `seen` is being processed.

    The stored request to pay (`seen` in `TASK_STATE_INPUT_REQUIRED`) does not, nor does a status without a
    message (the SDK's mark that a client message arrived); a terminal state or any other status does.
    """
    if task.status.state in _TERMINAL:
        return True
    if not task.status.HasField("message"):
        return False
    return not (
        task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and task.status.message.message_id == seen
    )


def _being_processed(task: Task) -> Task:
    """`task`, whose processing has reported no status yet, as the answer to its payment presented again.

    Its stored status still shows the request to pay (or only the SDK's mark that the payment arrived); the
    specification (§11) answers `TASK_STATE_WORKING` without a status message: the payment is being processed.
    """
    answer = Task()
    answer.CopyFrom(task)
    answer.status.ClearField("message")
    answer.status.state = TaskState.TASK_STATE_WORKING
    return answer


def _answers(event: Task | TaskStatusUpdateEvent, dialect: Dialect) -> bool:
    """Whether a blocking SendMessage answers at this event: the task is done, interrupted or pending."""
    if event.status.state in _ANSWERED:
        return True
    try:
        data = message_payment_data(event.status.message, dialect)
    except ExtensionMetadataError:
        return False
    return isinstance(data, PaymentVerifiedData) and data.pending_transaction is not None
