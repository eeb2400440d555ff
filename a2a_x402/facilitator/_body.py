"""Reading a request's JSON body within bounds: at most `max_bytes`, and all of it within `timeout_s`.

A `Content-Length` over the limit is refused before a byte of the body is read, a chunked body as soon as it
passes the limit, so at most one limit's worth (plus one read) is ever held. A body still arriving when its
deadline passes is refused too: a client trickling its body would otherwise hold its request, and the
connection under it, for as long as it likes (uvicorn times out neither). A client that goes away before
its body is complete is refused like a body that is not JSON, answered to nobody: it is the client's doing,
not a failure of the service to log.
"""

from __future__ import annotations

import asyncio

import orjson
from starlette.requests import ClientDisconnect, Request

from .wire import Reason, WireError

__all__ = ["BodyTooSlowError", "read_json"]


class BodyTooSlowError(WireError):
    """The body did not arrive within its deadline; the rest of it is never read."""


async def read_json(request: Request, *, max_bytes: int, timeout_s: float) -> object:
    """The request body as JSON.

    Raises:
        BodyTooSlowError: the body was not received within `timeout_s`.
        WireError: the body is larger than `max_bytes`, not JSON, or cut short by the client.
    """
    too_large = f"the body must be at most {max_bytes} bytes"
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > max_bytes):
        raise WireError(Reason.INVALID_PAYLOAD, too_large)
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_bytes:
                    raise WireError(Reason.INVALID_PAYLOAD, too_large)
    except TimeoutError:
        message = f"the request body was not received within {timeout_s:g} s"
        raise BodyTooSlowError(Reason.INVALID_PAYLOAD, message) from None
    except ClientDisconnect:
        raise WireError(
            Reason.INVALID_PAYLOAD, "the client closed the request before its body ended"
        ) from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise WireError(Reason.INVALID_PAYLOAD, "the body is not valid JSON") from None
