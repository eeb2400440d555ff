"""The paying client's side of a fault scenario: ask for terms, pay, and poll until the answer is definite.

A client's answer is *definite* when the task says how its payment ended: completed (paid, artifact
delivered), failed (nothing charged), canceled/rejected, or input-required (not paid: fresh terms).
`TASK_STATE_WORKING` is not an answer but a promise: the client holds the task id and polls it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_CHECKOUT_JWT_KEY,
    Ap2Mandates,
    PaymentVerifiedData,
)
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import MerchantWire, offered_terms, payment_data, payment_message, user_message

__all__ = [
    "DEFINITE_STATES",
    "JSON",
    "Offered",
    "open_offer",
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


class Offered(NamedTuple):
    """A task asking for payment: its id, the terms it offers, and its AP2 checkout JWT (the embedded
    flow's `ap2-checkout` artifact) when its tenant offers one."""

    task_id: str
    terms: PaymentRequirements
    checkout: str | None


async def open_offer(wire: MerchantWire, text: str = "The quick brown fox. The dog sleeps.") -> Offered:
    """Ask for the priced skill; the task asking for payment."""
    task: JSON = (await wire.send(user_message(text)))["task"]
    if task["status"]["state"] != "TASK_STATE_INPUT_REQUIRED":
        raise AssertionError(f"the merchant did not ask for payment: {task}")
    checkouts = [
        artifact["parts"][0]["data"][AP2_CHECKOUT_JWT_KEY]
        for artifact in task.get("artifacts", [])
        if artifact["artifactId"] == AP2_CHECKOUT_ARTIFACT_ID
    ]
    return Offered(str(task["id"]), offered_terms(task).accepts[0], checkouts[0] if checkouts else None)


async def open_task(
    wire: MerchantWire, text: str = "The quick brown fox. The dog sleeps."
) -> tuple[str, PaymentRequirements]:
    """Ask for the priced skill; the task id and the terms it offers."""
    offered = await open_offer(wire, text)
    return offered.task_id, offered.terms


async def pay(
    wire: MerchantWire, task_id: str, payload: PaymentPayload | JSON, mandates: Ap2Mandates | None = None
) -> JSON:
    """Submit `payload` for task `task_id` (a blocking SendMessage), with the AP2 `mandates` data part
    (§20.4) beside its text when given; the task as answered."""
    message = payment_message(task_id, payload)
    if mandates is not None:
        message["parts"].append({"data": mandates.to_wire(), "mediaType": "application/json"})
    answer: JSON = (await wire.send(message))["task"]
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
