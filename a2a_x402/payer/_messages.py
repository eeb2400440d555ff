"""The messages the payer sends: the user's request and its extension messages on the merchant's task.

Extension messages (``payment-submitted``, ``payment-rejected``) name the task and its context, list
``EXTENSION_URI`` in ``Message.extensions`` and carry the extension data in the v0.3 wire form under
``metadata[EXTENSION_URI]``; a short text part says the same for people reading the task's history.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types import Message, Part, Role, Task
from google.protobuf.struct_pb2 import Value

from a2a_x402.extension import (
    EXTENSION_URI,
    Ap2Mandates,
    Dialect,
    PaymentRejectedData,
    PaymentSubmittedData,
    encode,
)

from ._stages import SignedPayment

__all__ = ["decline_message", "payment_message", "submitted_payload", "user_message"]


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


def payment_message(task: Task, payload: SignedPayment, mandates: Ap2Mandates | None = None) -> Message:
    """``payment-submitted`` with ``payload`` for ``task``, and the AP2 mandates part (§20.4) when given."""
    terms = payload.accepted
    amount = f"up to {terms.amount}" if terms.scheme == "upto" else str(terms.amount)
    text = f"Payment of {amount} atomic units of {terms.asset} on {terms.network} to {terms.pay_to}."
    message = _extension_message(task, PaymentSubmittedData(payload), text)
    if mandates is not None:
        value = Value()
        value.struct_value.update(mandates.to_wire())
        message.parts.append(Part(data=value, media_type="application/json"))
    return message


def submitted_payload(payload: SignedPayment) -> dict[str, Any]:
    """The ``payload`` member of the ``payment-submitted`` extension object as sent: what §20.4's
    ``payload_hash`` is the hash of."""
    entry = encode(PaymentSubmittedData(payload), Dialect.V03)[EXTENSION_URI]
    wire = entry.get("payload") if isinstance(entry, dict) else None
    if not isinstance(wire, dict):
        raise RuntimeError("payment-submitted always carries its payload")
    return wire


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
