"""A Permit2 payment travels in `payment-submitted` as the extension reads it back, and a completed `upto`
task reports what was settled of the maximum, with the merchant's usage."""

from __future__ import annotations

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict

from a2a_x402.extension import (
    EXTENSION_URI,
    Dialect,
    PaymentCompletedData,
    PaymentSubmittedData,
    PaymentUsage,
    UsageItem,
    decode,
    encode,
)
from a2a_x402.facilitator.wire import PaymentRequirements, SettleResponse
from a2a_x402.payer import PaidResult, sign_permit2_payment
from a2a_x402.payer._messages import payment_message
from a2a_x402.payer._stages import TaskView
from tests.facilitator.permit2_payments import NETWORK, PAYER_KEY, requirements

MAXIMUM = 1_500_000


def _upto() -> PaymentRequirements:
    return PaymentRequirements.from_wire(requirements("upto"))


def test_a_permit2_payment_is_submitted_as_the_extension_reads_it() -> None:
    for wire in (requirements("exact"), requirements("upto")):
        payload = sign_permit2_payment(PAYER_KEY, PaymentRequirements.from_wire(wire))

        message = payment_message(Task(id="t1", context_id="c1"), payload)

        assert decode(MessageToDict(message.metadata), Dialect.V03) == PaymentSubmittedData(payload)
    assert message.parts[0].text.startswith(f"Payment of up to {MAXIMUM} atomic units")


def _completed(amount: int, transaction: str, usage: PaymentUsage) -> Task:
    receipt = SettleResponse(success=True, amount=amount, transaction=transaction, network=NETWORK)
    status = Message(role=Role.ROLE_AGENT, parts=[Part(text="done")])
    status.metadata.update(encode(PaymentCompletedData((receipt,), usage), Dialect.V03))
    return Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=status))


def test_a_completed_upto_task_says_what_was_settled_of_the_maximum() -> None:
    usage = PaymentUsage(maximum=MAXIMUM, settled=30_000, items=(UsageItem("tokens", 1200, 25, 30_000),))
    view = TaskView()
    view.replace(_completed(30_000, "0x" + "ab" * 32, usage))
    payment = view.payment
    assert isinstance(payment, PaymentCompletedData)

    result = PaidResult(view.task, payment.receipts, _upto(), "0xPayer", usage=payment.usage)

    assert (result.settled, result.paid and result.paid.amount, result.usage) == (30_000, MAXIMUM, usage)
    assert result.transaction == "0x" + "ab" * 32


def test_an_upto_task_that_used_nothing_settles_zero_without_a_transaction() -> None:
    view = TaskView()
    view.replace(_completed(0, "", PaymentUsage(maximum=MAXIMUM, settled=0)))
    payment = view.payment
    assert isinstance(payment, PaymentCompletedData)

    result = PaidResult(view.task, payment.receipts, _upto(), "0xPayer", usage=payment.usage)

    assert (result.settled, result.transaction) == (0, None)
    assert EXTENSION_URI in MessageToDict(view.task.status.message.metadata)
