"""A2A 0.3 HTTP+JSON `message:send` without `configuration` is non-blocking, as the 0.3 proto reads it.

The 0.3 HTTP+JSON body is the JSON form of the 0.3 proto's `SendMessageRequest`, whose
`SendMessageConfiguration.blocking` is a plain proto3 `bool`: an absent field is false, and false means
"non-blocking, the task is returned immediately". An absent `configuration` is the default message, so the
same. The SDK's 0.3 layer (a2a-sdk 1.3) reads `{"configuration": {}}` that way but an absent
`configuration` as blocking (the 1.0 default); the body is given `"configuration": {"blocking": false}`
before it reaches the SDK. 0.3 JSON-RPC is left blocking: its JSON schema gives `blocking` no default and
a2a-sdk 0.3's own server blocks there.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.types import Message

__all__ = ["REST_V0_3_SEND_SUFFIX", "with_v0_3_rest_send_default"]

REST_V0_3_SEND_SUFFIX = "/v1/message:send"
"""The end of the 0.3 HTTP+JSON `message:send` path (the blocking one; `message:stream` never blocks)."""


def with_v0_3_rest_send_default(request: Request, body: Any) -> Request:
    """`request` (a 0.3 HTTP+JSON `message:send` whose JSON body is `body`), non-blocking when it names no
    configuration; otherwise unchanged."""
    if not isinstance(body, dict) or body.get("configuration") is not None:
        return request
    raw = orjson.dumps({**body, "configuration": {"blocking": False}})

    async def receive() -> Message:
        return {"type": "http.request", "body": raw, "more_body": False}

    return Request(request.scope, receive)
