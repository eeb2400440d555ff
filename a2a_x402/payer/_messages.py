"""The messages the payer sends: the user's request and its extension messages on the merchant's task.

Extension messages (``payment-submitted``, ``payment-rejected``) name the task and its context, list
``EXTENSION_URI`` in ``Message.extensions`` and carry the extension data in the v0.3 wire form under
``metadata[EXTENSION_URI]``; a short text part says the same for people reading the task's history.
"""

from __future__ import annotations

import uuid

from a2a.types import Message, Part, Role, Task

from a2a_x402.extension import EXTENSION_URI, Dialect, PaymentRejectedData, PaymentSubmittedData, encode

from ._stages import SignedPayment

__all__ = ["decline_message", "payment_message", "user_message"]


def user_message(request: str | Message) -> Message:
    """The request as a user message with an id: ``request`` itself (copied) or one text part."""
    if isinstance(request, str):
        return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=request)])
    message = Message()
    message.CopyFrom(request)
    if not message.message_id:
        message.message_id = str(uuid.uuid4())
    if message.role == Role.ROLE_UNSPECIFIED:
        message.role = Role.ROLE_USER
    return message


def payment_message(task: Task, payload: SignedPayment) -> Message:
    """``payment-submitted`` with ``payload`` for ``task``."""
    terms = payload.accepted
    amount = f"up to {terms.amount}" if terms.scheme == "upto" else str(terms.amount)
    text = f"Payment of {amount} atomic units of {terms.asset} on {terms.network} to {terms.pay_to}."
    return _extension_message(task, PaymentSubmittedData(payload), text)


def decline_message(task: Task) -> Message:
    """``payment-rejected`` for ``task``: the payer will not pay these terms."""
    return _extension_message(task, PaymentRejectedData(), "Payment declined by the payer's policy.")


def _extension_message(task: Task, data: PaymentSubmittedData | PaymentRejectedData, text: str) -> Message:
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        task_id=task.id,
        context_id=task.context_id,
        parts=[Part(text=text)],
        extensions=[EXTENSION_URI],
    )
    message.metadata.update(encode(data, Dialect.V03))
    return message
