"""The messages the kit sends, in the form of each interface's A2A version: what a client could send.

A2A 1.0 (ProtoJSON): ``{"messageId", "role": "ROLE_USER", "parts": [{"text"}]}`` with extension data under
``metadata[EXTENSION_URI]``. A2A 0.3 JSON-RPC: ``kind`` discriminators and ``"role": "user"``; A2A 0.3
HTTP+JSON: the 0.3 proto's JSON (``content``); both with the flat ``x402.payment.*`` keys of v0.2.
"""

from __future__ import annotations

import uuid
from typing import Any

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02

from ._card import Interface

__all__ = ["extension_message", "user_message"]

JSON = Any


def user_message(interface: Interface, text: str, *, task_id: str = "", metadata: JSON = None) -> JSON:
    """A user message with one text part (a fresh ``messageId``), in the interface's version's form."""
    message: JSON
    if interface.version == "1.0":
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    elif interface.binding == "JSONRPC":
        message = {
            "kind": "message",
            "messageId": str(uuid.uuid4()),
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
        }
    else:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "content": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    if metadata is not None:
        message["metadata"] = metadata
    return message


def extension_message(interface: Interface, task_id: str, status: str, **members: JSON) -> JSON:
    """The client's extension message (``payment-submitted`` with ``payload``, ``payment-rejected``)."""
    text = "Here is my payment." if status == "payment-submitted" else "No, thank you."
    if interface.version == "1.0":
        message = user_message(
            interface, text, task_id=task_id, metadata={EXTENSION_URI: {"status": status, **members}}
        )
        message["extensions"] = [EXTENSION_URI]
        return message
    flat = {
        "x402.payment.status": status,
        **{f"x402.payment.{name}": value for name, value in members.items()},
    }
    message = user_message(interface, text, task_id=task_id, metadata=flat)
    message["extensions"] = [EXTENSION_URI_V02]
    return message
