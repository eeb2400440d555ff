"""The A2A 0.3 streaming form of the paid flow (``message/stream``, ``POST /v1/message:stream``), in the v0.2
forms: the same assertions as the 1.0 streaming checks, read from 0.3 events.

0.3 JSON-RPC events are objects with a ``kind`` (``task``, ``status-update``, ``artifact-update``); 0.3
HTTP+JSON events wrap them as ``task``, ``statusUpdate`` and ``artifactUpdate``.
"""

from __future__ import annotations

from typing import Any

from ._context import Probe, fail
from ._flows_0_3 import flat_value, sign_v1, terms_v1
from ._messages import extension_message, user_message
from ._reading import state_of
from ._reply import Reply
from ._steps import expect_settled, successful_receipt
from ._wire import Wire

__all__ = ["V02_STREAM_CHECKS", "v02_streamed_task"]

JSON = Any
V02_STREAM_CHECKS = ("v02.streaming-terms", "v02.streaming-paid-turn")
_KINDS = {"task": "task", "status-update": "status", "artifact-update": "artifact"}
_WRAPPERS = {"task": "task", "statusUpdate": "status", "artifactUpdate": "artifact"}


def _event(event: JSON) -> tuple[str, JSON]:
    """The event's kind (``task``, ``status``, ``artifact`` or ``""``) and the object it carries."""
    if not isinstance(event, dict):
        return "", None
    if event.get("kind") in _KINDS:
        return _KINDS[event["kind"]], event
    for wrapper, kind in _WRAPPERS.items():
        if isinstance(event.get(wrapper), dict):
            return kind, event[wrapper]
    return "", None


def _statuses(events: list[JSON]) -> list[tuple[int, JSON]]:
    found = []
    for index, event in enumerate(events):
        kind, holder = _event(event)
        if kind in ("task", "status"):
            found.append((index, holder))
    return found


async def v02_streamed_task(probe: Probe, wire: Wire) -> None:
    """The first turn and the paid turn over the 0.3 streaming call of the interface."""
    interface = wire.interface
    first = await wire.stream(user_message(interface, probe.run.discovery.request_text))
    async with probe.check("v02.streaming-terms"):
        if first.error is not None or not first.events:
            raise fail("the stream sent no events", first.exchange)
        if _event(first.events[0])[0] != "task":
            raise fail("the stream does not start with a task event", first.exchange)
        statuses = _statuses(first.events)
        last = statuses[-1][1]
        if (
            state_of(last, version="0.3") != "TASK_STATE_INPUT_REQUIRED"
            or flat_value(last, "status") != "payment-required"
        ):
            raise fail(
                "the stream does not end on input-required with x402.payment.status payment-required",
                first.exchange,
            )
        task_id = str(last.get("taskId") or last.get("id"))
        required = terms_v1(Reply(result={**last, "id": task_id}, exchange=first.exchange))
    if probe.failed:
        return
    async with probe.check("v02.streaming-paid-turn") as shown:
        shown.append(first.exchange)
        signed, payload = sign_v1(probe, interface.tenant, required)
        paid = await wire.stream(extension_message(interface, task_id, "payment-submitted", payload=payload))
        if paid.error is not None:
            raise fail("the streamed payment was refused", paid.exchange)
        kinds = [(i, state_of(h, version="0.3"), flat_value(h, "status")) for i, h in _statuses(paid.events)]
        verified = [
            i for i, state, status in kinds if (state, status) == ("TASK_STATE_WORKING", "payment-verified")
        ]
        artifacts = [i for i, event in enumerate(paid.events) if _event(event)[0] == "artifact"]
        if not kinds or kinds[-1][1:] != ("TASK_STATE_COMPLETED", "payment-completed"):
            raise fail("the stream does not end on completed with payment-completed", paid.exchange)
        if not verified or not artifacts:
            raise fail("the stream lacks payment-verified (working) or the artifact", paid.exchange)
        if min(artifacts) < verified[0]:
            raise fail("an artifact comes before payment-verified", paid.exchange)
        if max(artifacts) > kinds[-1][0]:
            raise fail("an artifact follows the terminal status", paid.exchange)
        receipt = successful_receipt(flat_value(_statuses(paid.events)[-1][1], "receipts"))
        if receipt is None:
            raise fail("x402.payment.receipts does not end with a successful receipt", paid.exchange)
        await expect_settled(probe.run.chain, probe, signed, receipt, paid)
