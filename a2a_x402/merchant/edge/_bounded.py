"""Bounded requests: a body over its limit, read too slowly, or holding too much is refused before any route
parses it.

Pure ASGI and outermost in the app, so it applies before authentication, routing and the SDK, to every path.
A body is read here, up to `RequestLimits.max_body_bytes` and within `body_timeout_s` from the request's
start, and handed on whole; the routes then read it from memory. A `Content-Length` over the limit is
refused before a byte of the body is read; a chunked body is counted as it arrives and refused as soon as
it passes the limit, so at most one limit's worth (plus one read) is ever held. On the A2A paths the body
is then parsed once with orjson, and its parts and metadata are checked (`_limits`) before the SDK's far
slower conversion to protobuf.

Every refusal is HTTP 413 (408 for a body too slow) with `Connection: close`, the rest of the body unread,
in the form of the binding and version (`_error_forms`): on JSON-RPC an InvalidRequest error object (the
request's `id` when it could be read; 0.3's form without ErrorInfo on 0.3), on HTTP+JSON a
`google.rpc.Status` INVALID_ARGUMENT with ErrorInfo reason INVALID_REQUEST (and 0.3's `type` beside it),
elsewhere FastAPI's `{"detail": ...}`. Nothing is created or changed by a refused request.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import InvalidRequestError, VersionNotSupportedError
from starlette.datastructures import Headers, QueryParams
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._error_forms import rest_error, rest_typed, v0_3_error, with_error_info
from ._limits import RequestLimits, json_shape_problem
from .paths import JSONRPC_PATH, is_a2a_path
from .versions import ProtocolVersion, negotiate_version

__all__ = ["BoundedRequestsMiddleware"]

_TOO_LARGE = 413
_TOO_SLOW = 408
_ALL_VERSIONS = (ProtocolVersion.V1_0, ProtocolVersion.V0_3)


class _Refused(Exception):
    def __init__(self, status: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.request_id = request_id


class BoundedRequestsMiddleware:
    """Refuses requests over `limits` (see the module); hands every other one on with its body read."""

    def __init__(self, app: ASGIApp, *, limits: RequestLimits) -> None:
        self._app = app
        self._limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not _has_body(headers):
            await self._app(scope, receive, send)
            return
        try:
            body = await self._read(headers, receive)
            if body is None:
                return  # the client went away: nobody to answer
            if is_a2a_path(scope["path"]) and body:
                self._check_shape(body)
        except _Refused as refusal:
            await _refusal(scope, refusal)(scope, receive, send)
            return
        await self._app(scope, _replay(body, receive), send)

    async def _read(self, headers: Headers, receive: Receive) -> bytes | None:
        limit = self._limits.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise _Refused(
                _TOO_LARGE, f"the request body is {int(declared)} bytes, over the limit of {limit}"
            )
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self._limits.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise _Refused(_TOO_LARGE, f"the request body is over the limit of {limit} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise _Refused(
                _TOO_SLOW, f"the request body was not received within {self._limits.body_timeout_s:g} s"
            ) from None

    def _check_shape(self, body: bytes) -> None:
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            return  # the route answers a body that is not JSON in its binding's words
        problem = json_shape_problem(document, self._limits)
        if problem is not None:
            request_id = document.get("id") if isinstance(document, dict) else None
            raise _Refused(_TOO_LARGE, problem, request_id)


def _has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() not in ("", "0"))


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # the disconnect, for streaming answers

    return replay


def _version(scope: Scope) -> ProtocolVersion:
    headers, query = Headers(scope=scope), QueryParams(scope.get("query_string", b""))
    try:
        return negotiate_version(headers.get(VERSION_HEADER), query.get(VERSION_HEADER), _ALL_VERSIONS)
    except VersionNotSupportedError:
        return ProtocolVersion.V1_0


def _refusal(scope: Scope, refusal: _Refused) -> Response:
    """The refusal in the form of the binding and version the request is for (see the module)."""
    path: str = scope["path"]
    response: Response
    if not is_a2a_path(path):
        response = JSONResponse({"detail": refusal.message}, status_code=refusal.status)
    else:
        error = InvalidRequestError(message=refusal.message)
        version = _version(scope)
        if path.rstrip("/").endswith(JSONRPC_PATH):
            if version is ProtocolVersion.V0_3:
                answer = v0_3_error(error)
            else:
                answer = with_error_info({"code": -32600, "message": refusal.message})
            request_id = refusal.request_id if isinstance(refusal.request_id, str | int) else None
            body = {"jsonrpc": "2.0", "id": request_id, "error": answer}
            response = JSONResponse(body, status_code=refusal.status)
        else:
            rest = rest_error(error)
            payload = orjson.loads(bytes(rest.body))
            payload["error"]["code"] = refusal.status
            response = rest_typed(JSONResponse(payload, status_code=refusal.status), version)
    # The rest of the body is never read: the connection cannot carry another request.
    response.headers["connection"] = "close"
    return response
