"""The paying client's side of a fault scenario: ask for terms, pay, and poll until the answer is definite.

A client's answer is *definite* when the task says how its payment ended: completed (paid, artifact
delivered), failed (nothing charged), canceled/rejected, or input-required (not paid: fresh terms).
`TASK_STATE_WORKING` is not an answer but a promise: the client holds the task id and polls it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from a2a_x402.extension import PaymentVerifiedData
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import MerchantWire, offered_terms, payment_data, payment_message, user_message

__all__ = [
    "DEFINITE_STATES",
    "JSON",
    "open_task",
    "pay",
    "pending_transaction",
    "poll_until_definite",
]

JSON = dict[str, Any]

DEFINITE_STATES = frozenset(
    {
        "TASK_STATE_COMPLETED",
        "TASK_STATE_FAILED",
        "TASK_STATE_CANCELED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
    }
)
_POLL_S = 0.05


async def open_task(
    wire: MerchantWire, text: str = "The quick brown fox. The dog sleeps."
) -> tuple[str, PaymentRequirements]:
    """Ask for the priced skill; the task id and the terms it offers."""
    task: JSON = (await wire.send(user_message(text)))["task"]
    if task["status"]["state"] != "TASK_STATE_INPUT_REQUIRED":
        raise AssertionError(f"the merchant did not ask for payment: {task}")
    return str(task["id"]), offered_terms(task).accepts[0]


async def pay(wire: MerchantWire, task_id: str, payload: PaymentPayload | JSON) -> JSON:
    """Submit `payload` for task `task_id` (a blocking SendMessage); the task as answered."""
    answer: JSON = (await wire.send(payment_message(task_id, payload)))["task"]
    return answer


def pending_transaction(task: JSON) -> str:
    """The settlement transaction a working task says is waiting for confirmation.

    Raises:
        AssertionError: the task is not working on a pending settlement.
    """
    data = payment_data(task)
    if task["status"]["state"] != "TASK_STATE_WORKING" or not isinstance(data, PaymentVerifiedData):
        raise AssertionError(f"not a task with a pending settlement: {task['status']}")
    if not data.pending_transaction:
        raise AssertionError(f"the working task names no pending transaction: {data}")
    return data.pending_transaction


async def poll_until_definite(wire: MerchantWire, task_id: str, *, timeout_s: float = HANG_S) -> JSON:
    """GetTask until the task's state is definite; the task.

    Raises:
        AssertionError: it is still undecided after `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        task = await wire.get_task(task_id)
        if task["status"]["state"] in DEFINITE_STATES:
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} still {task['status']['state']} after {timeout_s} s")
        await asyncio.sleep(_POLL_S)
