"""A2A 0.3 HTTP+JSON requests read as the 0.3 proto defines them, where the SDK's 0.3 layer reads them
otherwise.

Blocking. The 0.3 HTTP+JSON body is the JSON form of the 0.3 proto's `SendMessageRequest`, whose
`SendMessageConfiguration.blocking` is a plain proto3 `bool`: an absent field is false, and false means
"non-blocking, the task is returned immediately". An absent `configuration` is the default message, so the
same. The SDK's 0.3 layer (a2a-sdk 1.3) reads `{"configuration": {}}` that way but an absent
`configuration` as blocking (the 1.0 default); the body is given `"configuration": {"blocking": false}`
before it reaches the SDK. 0.3 JSON-RPC is left blocking: its JSON schema gives `blocking` no default and
a2a-sdk 0.3's own server blocks there.

Query parameters. The 0.3 proto maps `GetTask` to `GET /v1/{name=tasks/*}` (google.api.http), whose other
request fields are query parameters named by their field path, the proto name `history_length`; the JSON
name `historyLength` is the other accepted spelling. The SDK's 0.3 layer reads only `historyLength`, so
`history_length` is given that name (when the request does not already use it).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson
from starlette.requests import Request
from starlette.types import Message

__all__ = ["REST_V0_3_SEND_SUFFIX", "with_v0_3_rest_query_names", "with_v0_3_rest_send_default"]

REST_V0_3_SEND_SUFFIX = "/v1/message:send"
"""The end of the 0.3 HTTP+JSON `message:send` path (the blocking one; `message:stream` never blocks)."""
# Proto field names of 0.3 query parameters, by the JSON name the SDK's 0.3 layer reads.
_QUERY_JSON_NAMES = {"history_length": "historyLength"}


def with_v0_3_rest_send_default(request: Request, body: Any) -> Request:
    """`request` (a 0.3 HTTP+JSON `message:send` whose JSON body is `body`), non-blocking when it names no
    configuration; otherwise unchanged."""
    if not isinstance(body, dict) or body.get("configuration") is not None:
        return request
    raw = orjson.dumps({**body, "configuration": {"blocking": False}})

    async def receive() -> Message:
        return {"type": "http.request", "body": raw, "more_body": False}

    return Request(request.scope, receive)


def with_v0_3_rest_query_names(request: Request) -> Request:
    """`request` (a 0.3 HTTP+JSON GET) with its query parameters under the JSON names the SDK reads."""
    pairs = parse_qsl(request.url.query, keep_blank_values=True)
    names = {name for name, _ in pairs}
    renamed = [
        (_QUERY_JSON_NAMES[name], value)
        if name in _QUERY_JSON_NAMES and _QUERY_JSON_NAMES[name] not in names
        else (name, value)
        for name, value in pairs
    ]
    if renamed == pairs:
        return request
    return Request({**request.scope, "query_string": urlencode(renamed).encode()}, request.receive)
