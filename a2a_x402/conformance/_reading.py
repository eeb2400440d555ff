"""Reading A2A answers the way a client must: defensively, never assuming a member is there or typed.

Both versions' forms are read (1.0 ProtoJSON: ``TASK_STATE_*``, parts without ``kind``; 0.3 JSON-RPC:
``kind``, ``input-required``; 0.3 HTTP+JSON: the 0.3 proto's JSON). ``expect_error`` says whether an
answer is the A2A error a check expects, in the binding's own form (JSON-RPC code, HTTP status, gRPC
status, and the ``ErrorInfo`` reason where A2A 1.0 carries one).
"""

from __future__ import annotations

from typing import Any

from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_V01_CART_MANDATE_KEY,
    ExtensionMetadataError,
    parse_ap2_checkout_data,
)

from ._card import Interface
from ._reply import Reply

__all__ = [
    "A2A_ERRORS",
    "artifacts_of",
    "cart_data",
    "checkout_artifacts_of",
    "expect_error",
    "is_checkout_artifact",
    "metadata_of",
    "state_of",
    "status_message_of",
]

JSON = Any

A2A_ERRORS: dict[str, tuple[int, int, str]] = {
    "EXTENSION_SUPPORT_REQUIRED": (-32008, 400, "FAILED_PRECONDITION"),
    "INVALID_PARAMS": (-32602, 400, "INVALID_ARGUMENT"),
    "UNSUPPORTED_OPERATION": (-32004, 400, "FAILED_PRECONDITION"),
    "TASK_NOT_FOUND": (-32001, 404, "NOT_FOUND"),
}
"""A2A reason → (JSON-RPC code, HTTP status, gRPC status), as A2A 1.0.1 maps them."""
"""The data key of the merchant's AP2 v0.1 cart on A2A 0.3 (§20.7)."""

_STATES_0_3 = {
    "submitted": "TASK_STATE_SUBMITTED",
    "working": "TASK_STATE_WORKING",
    "input-required": "TASK_STATE_INPUT_REQUIRED",
    "completed": "TASK_STATE_COMPLETED",
    "canceled": "TASK_STATE_CANCELED",
    "failed": "TASK_STATE_FAILED",
    "rejected": "TASK_STATE_REJECTED",
    "auth-required": "TASK_STATE_AUTH_REQUIRED",
}


def state_of(task: JSON, *, version: str = "1.0") -> str:
    """The task's state in its 1.0 spelling (a 0.3 spelling read on a 0.3 interface), or ``""``."""
    status = task.get("status") if isinstance(task, dict) else None
    state = status.get("state") if isinstance(status, dict) else None
    if not isinstance(state, str):
        return ""
    return _STATES_0_3.get(state, state) if version == "0.3" else state


def status_message_of(task: JSON) -> JSON:
    """The task's (or status update's) status message, if it is an object."""
    status = task.get("status") if isinstance(task, dict) else None
    message = status.get("message") if isinstance(status, dict) else None
    return message if isinstance(message, dict) else None


def metadata_of(task: JSON) -> JSON:
    """The metadata of the status message, if it is an object."""
    message = status_message_of(task)
    metadata = message.get("metadata") if message is not None else None
    return metadata if isinstance(metadata, dict) else None


def is_checkout_artifact(artifact: JSON) -> bool:
    """Whether ``artifact`` is an AP2 checkout (§20.3): id ``ap2-checkout`` and exactly one data part holding
    exactly a checkout JWT, or on A2A 0.3 exactly an AP2 v0.1 ``CartMandate`` object (§20.7). It is an
    offer, not work; anything else under that id is work."""
    if not isinstance(artifact, dict) or artifact.get("artifactId") != AP2_CHECKOUT_ARTIFACT_ID:
        return False
    parts = artifact.get("parts")
    if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0], dict):
        return False
    if isinstance(cart_data(parts[0]), dict):
        return True
    try:
        parse_ap2_checkout_data(parts[0].get("data"))
    except ExtensionMetadataError:
        return False
    return True


def cart_data(part: JSON) -> JSON:
    """The ``CartMandate`` object of a 0.3 data part (JSON-RPC ``data``, HTTP+JSON ``data.data``) holding
    exactly ``ap2.mandates.CartMandate``, or ``None``."""
    data = part.get("data") if isinstance(part, dict) else None
    if isinstance(data, dict) and set(data) == {"data"}:
        data = data["data"]
    if not isinstance(data, dict) or set(data) != {AP2_V01_CART_MANDATE_KEY}:
        return None
    return data[AP2_V01_CART_MANDATE_KEY]


def _all_artifacts(task: JSON) -> list[JSON]:
    artifacts = task.get("artifacts") if isinstance(task, dict) else None
    return [a for a in artifacts if isinstance(a, dict)] if isinstance(artifacts, list) else []


def artifacts_of(task: JSON) -> list[JSON]:
    """The task's artifacts of work (an empty list when it has none or they are not a list): an AP2
    checkout (``is_checkout_artifact``) is an offer, not work (§20.3), and is left out."""
    return [a for a in _all_artifacts(task) if not is_checkout_artifact(a)]


def checkout_artifacts_of(task: JSON) -> list[JSON]:
    """Every artifact of the task with the id ``ap2-checkout``, well formed or not."""
    return [a for a in _all_artifacts(task) if a.get("artifactId") == AP2_CHECKOUT_ARTIFACT_ID]


def expect_error(reply: Reply, reason: str, interface: Interface) -> str:
    """Why ``reply`` is not the A2A error ``reason`` in the binding's form (``""``: it is)."""
    code, http_status, grpc_status = A2A_ERRORS[reason]
    error = reply.error
    if error is None:
        state = state_of(reply.task, version=interface.version) or "a result"
        return f"expected {reason}, the merchant answered {state}"
    got = f"code={error.code} http={error.http_status} grpc={error.grpc_status} reason={error.reason or '-'}"
    if interface.binding == "GRPC":
        ok = error.grpc_status == grpc_status and error.reason == reason
    elif interface.binding == "JSONRPC":
        ok = error.code == code and (interface.version == "0.3" or error.reason == reason)
    else:
        ok = error.http_status == http_status and (interface.version == "0.3" or error.reason == reason)
    return "" if ok else f"expected {reason} ({code} / HTTP {http_status} / {grpc_status}), got {got}"
