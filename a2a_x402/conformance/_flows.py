"""The A2A 1.0 checks of the terms, a paid task from request to receipt, and the same over a stream.

One paid task serves the checks that need one (terms, completion, the chain, the same payment presented
again and presented for a new task); the stream pays a second task. Every payment is signed by
``Signer`` within what the card lists.
"""

from __future__ import annotations

from typing import Any

from a2a_x402.extension import EXTENSION_URI, FLAT_KEY_PREFIX

from ._context import NotApplicable, Probe, fail
from ._messages import extension_message, user_message
from ._reading import (
    artifacts_of,
    expect_error,
    is_checkout_artifact,
    metadata_of,
    state_of,
    status_message_of,
)
from ._reply import Reply
from ._schema import schema_problems
from ._signer import Signed, payload_v2
from ._steps import (
    carries_signature,
    decoded,
    expect_settled,
    extension_object,
    new_offer,
    offer_from,
    outcome_of,
    successful_receipt,
)
from ._wire import Wire

__all__ = ["PAID_CHECKS", "STREAM_CHECKS", "completed", "paid_task", "streamed_task"]

JSON = Any
PAID_CHECKS = (
    "activation.echoed",
    "terms.placement",
    "terms.message-extensions",
    "terms.x402-v2",
    "terms.integers",
    "terms.listed-in-card",
    "terms.offer-id",
    "payment.completes",
    "payment.settled-on-chain",
    "payment.receipt-members",
    "payment.represented",
    "payment.replayed",
    "payment.no-signature",
)
STREAM_CHECKS = ("streaming.terms", "streaming.paid-turn", "streaming.no-signature")


async def _no_signature(probe: Probe, wire: Wire, task_id: str, paid: Reply, signed: Signed) -> None:
    """§11.7: neither the payment's answer, nor GetTask, nor ListTasks within the task's context carries
    the payment's signature."""
    got = await wire.get_task(task_id)
    context_id = (got.task or {}).get("contextId") or (paid.task or {}).get("contextId")
    listed = await wire.list_tasks(context_id if isinstance(context_id, str) else None)
    for what, reply in (("the payment's answer", paid), ("GetTask", got), ("ListTasks", listed)):
        if carries_signature(reply.result, signed):
            raise fail(f"{what} carries the payment's signature", reply.exchange)
    if not isinstance(got.task, dict):
        raise fail("GetTask of the paid task answers no task", got.exchange)


def _listed(value: str, header: str) -> bool:
    return value in (item.strip() for item in header.split(","))


async def _terms_checks(probe: Probe, wire: Wire, reply: Reply) -> None:
    task, tenant = reply.task, wire.interface.tenant
    async with probe.check("activation.echoed"):
        if not _listed(EXTENSION_URI, reply.headers.get("a2a-extensions", "")):
            raise fail("the answer's A2A-Extensions does not list the activated URI", reply.exchange)
    async with probe.check("terms.placement"):
        if reply.error is not None or task is None:
            raise fail("the priced request got no task", reply.exchange)
        if state_of(task) != "TASK_STATE_INPUT_REQUIRED":
            raise fail(
                f"the task is {state_of(task) or 'stateless'}, not TASK_STATE_INPUT_REQUIRED", reply.exchange
            )
        value = extension_object(task)
        if value is None or value.get("status") != "payment-required":
            raise fail(
                "no payment-required object under metadata[<extension URI>] of the status message",
                reply.exchange,
            )
        if any(key.startswith(FLAT_KEY_PREFIX) for key in metadata_of(task) or {}):
            raise fail("the status message also carries x402.payment.* keys (the v0.2 form)", reply.exchange)
    if probe.failed:
        return
    value = extension_object(task)
    required = value.get("required")
    async with probe.check("terms.message-extensions"):
        extensions = (status_message_of(task) or {}).get("extensions")
        if not isinstance(extensions, list) or EXTENSION_URI not in extensions:
            raise fail(
                "the status message carrying the extension object does not list the URI", reply.exchange
            )
    async with probe.check("terms.x402-v2"):
        problems = schema_problems("payment-required.json", value)
        if problems:
            raise fail("payment-required does not validate: " + "; ".join(problems), reply.exchange)
        decoded(task, reply)
    async with probe.check("terms.integers"):
        if wire.interface.binding == "GRPC":
            raise NotApplicable("gRPC carries metadata as a protobuf Struct, which has no integers")
        timeouts = [e.get("maxTimeoutSeconds") for e in required.get("accepts", []) if isinstance(e, dict)]
        if type(required.get("x402Version")) is not int or any(type(t) is not int for t in timeouts):
            raise fail("x402Version or maxTimeoutSeconds is not written as a JSON integer", reply.exchange)
    async with probe.check("terms.listed-in-card"):
        for entry in required.get("accepts", []):
            refusal = probe.run.discovery.allows(
                str(entry.get("network")), str(entry.get("asset")), str(entry.get("payTo")), tenant
            )
            if refusal:
                raise fail(f"an offered entry is outside the card: {refusal}", reply.exchange)
    async with probe.check("terms.offer-id"):
        for entry in required.get("accepts", []):
            offer_id = (entry.get("extra") or {}).get("offerId")
            if not isinstance(offer_id, str) or not offer_id:
                raise fail("an offered entry has no extra.offerId", reply.exchange)


def completed(task: JSON, reply: Reply) -> JSON:
    """The successful receipt of a task completed with an artifact and payment-completed (else fails)."""
    if state_of(task) != "TASK_STATE_COMPLETED":
        raise fail(
            f"the paid task is {state_of(task) or 'without a state'}, not TASK_STATE_COMPLETED",
            reply.exchange,
        )
    if not artifacts_of(task):
        raise fail("the completed task carries no artifact", reply.exchange)
    value = extension_object(task)
    if value is None or value.get("status") != "payment-completed":
        raise fail("the completed status message has no payment-completed object", reply.exchange)
    receipt = successful_receipt(value.get("receipts"))
    if receipt is None:
        raise fail(
            "payment-completed does not end with a successful receipt naming its transaction", reply.exchange
        )
    return receipt


async def paid_task(probe: Probe, wire: Wire) -> None:
    """Terms, payment, settlement, the same payment again, and the same payment for a new task."""
    interface, run = wire.interface, probe.run
    reply = await wire.send(user_message(interface, run.discovery.request_text))
    await _terms_checks(probe, wire, reply)
    async with probe.check("payment.completes") as shown:
        shown.append(reply.exchange)
        offer = offer_from(probe, reply, interface.tenant)
        signed = run.signer.sign(
            offer.entry, tenant=interface.tenant, network=offer.network, amount=offer.amount
        )
        payload = payload_v2(offer.entry, signed)
        paid = await wire.send(
            extension_message(interface, offer.task_id, "payment-submitted", payload=payload)
        )
        paid = await outcome_of(probe, wire, paid)
        shown[:] = [paid.exchange]
        if paid.error is not None or paid.task is None:
            raise fail("the payment got no task", paid.exchange)
        receipt = completed(paid.task, paid)
    if probe.failed or probe.skip_rest(
        "payment.completes", PAID_CHECKS[PAID_CHECKS.index("payment.completes") + 1 :]
    ):
        return
    async with probe.check("payment.settled-on-chain"):
        await expect_settled(run.chain, probe, signed, receipt, paid)
    async with probe.check("payment.receipt-members"):
        if receipt.get("payer") != signed.payer or receipt.get("amount") != str(signed.value):
            raise fail("the receipt does not name the payer and the amount", paid.exchange)
    async with probe.check("payment.represented"):
        again = await wire.send(
            extension_message(interface, offer.task_id, "payment-submitted", payload=payload)
        )
        problem = expect_error(again, "UNSUPPORTED_OPERATION", interface)
        if problem:
            raise fail(problem, again.exchange)
        await _still_once(probe, signed, receipt, again)
    async with probe.check("payment.replayed"):
        other = await new_offer(probe, wire)
        replay = await wire.send(
            extension_message(interface, other.task_id, "payment-submitted", payload=payload)
        )
        problem = expect_error(replay, "INVALID_PARAMS", interface)
        if problem:
            raise fail(problem, replay.exchange)
        after = await wire.get_task(other.task_id)
        if state_of(after.task) != "TASK_STATE_INPUT_REQUIRED" or artifacts_of(after.task):
            raise fail("the new task changed after the replayed payment", replay.exchange, after.exchange)
        await _still_once(probe, signed, receipt, replay)
    async with probe.check("payment.no-signature"):
        await _no_signature(probe, wire, offer.task_id, paid, signed)


async def _still_once(probe: Probe, signed: Signed, receipt: JSON, reply: Reply) -> None:
    uses = await probe.run.chain.uses_of(signed.asset, signed.payer, signed.nonce, probe.run.start_block)
    if uses != [receipt.get("transaction")]:
        raise fail(f"the authorization was used by {uses}: charged again", reply.exchange)


def _status_events(events: list[JSON]) -> list[tuple[int, JSON]]:
    found = []
    for index, event in enumerate(events):
        holder = event.get("statusUpdate") or event.get("task") if isinstance(event, dict) else None
        if isinstance(holder, dict):
            found.append((index, holder))
    return found


async def streamed_task(probe: Probe, wire: Wire) -> None:
    """The first turn and the paid turn over SendStreamingMessage."""
    interface, run = wire.interface, probe.run
    first = await wire.stream(user_message(interface, run.discovery.request_text))
    async with probe.check("streaming.terms"):
        if first.error is not None or not first.events:
            raise fail("the stream sent no events", first.exchange)
        if not isinstance(first.events[0], dict) or "task" not in first.events[0]:
            raise fail("the stream does not start with a task event", first.exchange)
        statuses = _status_events(first.events)
        last = statuses[-1][1] if statuses else None
        value = extension_object(last)
        if (
            state_of(last) != "TASK_STATE_INPUT_REQUIRED"
            or value is None
            or value.get("status") != "payment-required"
        ):
            raise fail(
                "the stream does not end on TASK_STATE_INPUT_REQUIRED with payment-required", first.exchange
            )
    if probe.failed:
        return
    last = _status_events(first.events)[-1][1]
    task_id = last.get("taskId") or last.get("id")
    async with probe.check("streaming.paid-turn") as shown:
        shown.append(first.exchange)
        terms = Reply(result={"task": {**last, "id": task_id}}, exchange=first.exchange)
        offer = offer_from(probe, terms, interface.tenant)
        signed = run.signer.sign(
            offer.entry, tenant=interface.tenant, network=offer.network, amount=offer.amount
        )
        payment = extension_message(
            interface, offer.task_id, "payment-submitted", payload=payload_v2(offer.entry, signed)
        )
        paid = await wire.stream(payment)
        if paid.error is not None:
            raise fail("the streamed payment was refused", paid.exchange)
        statuses = _status_events(paid.events)
        kinds = [(i, state_of(h), (extension_object(h) or {}).get("status")) for i, h in statuses]
        verified = [
            i for i, state, status in kinds if status == "payment-verified" and state == "TASK_STATE_WORKING"
        ]
        artifacts = [
            i
            for i, event in enumerate(paid.events)
            if isinstance(event, dict)
            and isinstance(event.get("artifactUpdate"), dict)
            and not is_checkout_artifact(event["artifactUpdate"].get("artifact"))
        ]
        if not kinds or kinds[-1][1:] != ("TASK_STATE_COMPLETED", "payment-completed"):
            raise fail(
                "the stream does not end on TASK_STATE_COMPLETED with payment-completed", paid.exchange
            )
        completed_at = kinds[-1][0]
        if not verified or not artifacts:
            raise fail("the stream lacks payment-verified (WORKING) or the artifact", paid.exchange)
        if min(artifacts) < verified[0]:
            raise fail("an artifact comes before payment-verified", paid.exchange)
        if max(artifacts) > completed_at:
            raise fail("an artifact follows the terminal status", paid.exchange)
        receipt = successful_receipt((extension_object(statuses[-1][1]) or {}).get("receipts"))
        if receipt is None:
            raise fail("payment-completed does not end with a successful receipt", paid.exchange)
        await expect_settled(run.chain, probe, signed, receipt, paid)
    if probe.failed or probe.skip_rest("streaming.paid-turn", ("streaming.no-signature",)):
        return
    async with probe.check("streaming.no-signature"):
        if any(carries_signature(event, signed) for event in paid.events):
            raise fail("an event of the paid stream carries the payment's signature", paid.exchange)
        await _no_signature(probe, wire, offer.task_id, Reply(), signed)
