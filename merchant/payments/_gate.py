"""Refusing bad payment requests before anything changes.

The executor runs inside the task's lifecycle, where an error moves the task to FAILED. Requests the
payment layer must refuse — malformed extension data, a priced skill without the extension activated, a
payment that does not match the task's terms or was already used — are refused here, by the edge, before
the request reaches the task: a clear A2A error, no state change, nothing booked.
"""

from __future__ import annotations

from collections.abc import Callable

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import Message, SendMessageRequest, TaskState
from a2a.utils.errors import ExtensionSupportRequiredError, InvalidParamsError, TaskNotCancelableError

from a2a_x402 import (
    EXTENSION_URI,
    EXTENSION_URI_V01,
    EXTENSION_URI_V02,
    FLAT_KEY_PREFIX,
    Dialect,
    ExtensionMetadataError,
    PaymentRejectedData,
    PaymentSubmittedData,
    negotiate_dialect,
)
from facilitator.wire import PaymentRequired

from ._offers import OfferState, OfferStore
from ._pricing import Pricing
from ._protocol import protocol_version
from ._wire import match_offer, message_payment_data, payload_hash

__all__ = ["MAX_MESSAGE_BYTES", "PaymentGate"]

MAX_MESSAGE_BYTES = 64 * 1024
_TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
EXTENSION_URIS = frozenset({EXTENSION_URI, EXTENSION_URI_V02, EXTENSION_URI_V01})
_TAKING_PAYMENT = {OfferState.VERIFYING, OfferState.WORKING, OfferState.SETTLING}


class PaymentGate:
    """The checks the edge runs on SendMessage and CancelTask before handing them to the SDK."""

    def __init__(
        self,
        *,
        pricing: Pricing,
        offers: OfferStore,
        task_store: TaskStore,
        skill_of: Callable[[Message], str],
    ):
        self._pricing = pricing
        self._offers = offers
        self._tasks = task_store
        self._skill_of = skill_of

    async def check_send(self, request: SendMessageRequest, call_context: ServerCallContext) -> None:
        """Raise the A2A error for a message the payment layer must refuse; return if it may proceed."""
        message = request.message
        if message.ByteSize() > MAX_MESSAGE_BYTES:
            raise InvalidParamsError(message=f"the message is larger than {MAX_MESSAGE_BYTES} bytes")
        dialect = negotiate_dialect(call_context.requested_extensions, protocol_version(call_context))
        data = self._read(message, dialect)
        if not message.task_id:
            if data is not None:
                raise InvalidParamsError(message="a payment message must name the task (taskId) it pays for")
            if dialect is None and self._pricing.price(call_context.tenant, self._skill_of(message)) > 0:
                raise ExtensionSupportRequiredError(
                    message="this skill is paid: activate the x402 payment extension (A2A-Extensions)"
                )
            return
        task = await self._tasks.get(message.task_id, call_context)
        if task is None or task.status.state in _TERMINAL:
            return  # the SDK answers TaskNotFound / UnsupportedOperation itself
        offer = await self._offers.get(task.id)
        if offer is None:
            if data is not None:
                raise InvalidParamsError(message="this task asked for no payment")
            return
        if dialect is None:
            raise ExtensionSupportRequiredError(
                message="this task is paid: activate the x402 payment extension"
            )
        if isinstance(data, PaymentRejectedData) and offer.state is not OfferState.OFFERED:
            raise InvalidParamsError(message=f"this task is not awaiting payment (it is {offer.state.value})")
        if not isinstance(data, PaymentSubmittedData):
            return
        matched = match_offer(data.payload, PaymentRequired.from_wire(offer.required))
        if matched is None:
            raise InvalidParamsError(message="the payment does not match the terms offered for this task")
        payload, _ = matched
        authorization = payload.payload.authorization
        other = await self._offers.by_authorization(authorization.from_address, authorization.nonce)
        if other is not None and other.task_id != task.id:
            raise InvalidParamsError(message="this payment authorization was already used for another task")
        if offer.state is not OfferState.OFFERED and offer.payload_hash != payload_hash(payload):
            raise InvalidParamsError(message=f"this task is not awaiting payment (it is {offer.state.value})")

    async def check_cancel(self, task_id: str) -> None:
        """Refuse to cancel a task whose payment is being taken: the payer could be charged for nothing."""
        offer = await self._offers.get(task_id)
        if offer is not None and offer.state in _TAKING_PAYMENT:
            raise TaskNotCancelableError(
                message="the task's payment is being settled; it can no longer be canceled"
            )

    def _read(self, message: Message, dialect: Dialect | None) -> object:
        """The message's extension data; extension data without the extension activated is refused."""
        if dialect is None:
            keys = message.metadata.keys() if message.HasField("metadata") else ()
            if any(key in EXTENSION_URIS or key.startswith(FLAT_KEY_PREFIX) for key in keys):
                raise ExtensionSupportRequiredError(
                    message="the message carries x402 payment data but the extension is not activated"
                )
            return None
        try:
            return message_payment_data(message, dialect)
        except ExtensionMetadataError as exc:
            raise InvalidParamsError(message=f"malformed x402 extension metadata: {exc}") from None
