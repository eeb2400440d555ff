"""A2A errors in the form of each binding and version, where the SDK's own answers fall short.

The SDK gives the errors it builds itself (JSON-RPC parse error, method not found, internal error;
an HTTP+JSON internal error) no `google.rpc.ErrorInfo`; they get one here, so every 1.0 error names its
reason. An unexpected exception is answered "Internal error" on every binding and version: the SDK would
put its text into the JSON-RPC answer. On 0.3 JSON-RPC (unary answers and stream events) an error is the
0.3 error object (`code`, `message`, `data` only when there is some, no ErrorInfo); the SDK's 0.3 layer
answers the 1.0 additions ExtensionSupportRequired and VersionNotSupported as InternalError, so they are
given back their 1.0 codes (-32008, -32009: server-defined codes on 0.3, which the a2a-sdk 0.3 compat client
maps to those errors). HTTP+JSON 0.3 errors are the `google.rpc.Status` of 1.0 (the SDK's 0.3 layer) plus,
beside it, the error's `type` and `message`, which is what the a2a-sdk 0.3 compat client reads (without them
it sees only the status code, and a TaskNotFound 404 becomes MethodNotFound).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.utils.error_handlers import A2A_DOMAIN, ERROR_INFO_TYPE, build_rest_error_payload
from a2a.utils.errors import A2A_ERROR_MAPPING, JSON_RPC_ERROR_CODE_MAP, A2AError, InternalError
from starlette.responses import JSONResponse, Response

from .versions import ProtocolVersion

__all__ = [
    "INTERNAL_MESSAGE",
    "finish_v0_3_error",
    "rest_error",
    "rest_typed",
    "rest_with_error_info",
    "rpc_code",
    "v0_3_error",
    "with_error_info",
]

# ErrorInfo reasons of the errors the SDK answers without one: by JSON-RPC code, by google.rpc status.
_INTERNAL_REASON = "INTERNAL_ERROR"
INTERNAL_MESSAGE = "Internal error"
_INTERNAL_CODE = -32603
_REST_REASONS = {"INTERNAL": _INTERNAL_REASON, "INVALID_ARGUMENT": "INVALID_REQUEST"}
_STANDARD_REASONS = {
    -32700: "JSON_PARSE",
    -32600: "INVALID_REQUEST",
    -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS",
    -32603: _INTERNAL_REASON,
}
# The error `type` of a 0.3 HTTP+JSON error body, by ErrorInfo reason.
_V0_3_ERROR_TYPES = {mapping.reason: kind.__name__ for kind, mapping in A2A_ERROR_MAPPING.items()}


def rpc_code(error: A2AError) -> int | None:
    """The JSON-RPC code of `error`, or None for an error the SDK's table does not know."""
    return next((code for kind, code in JSON_RPC_ERROR_CODE_MAP.items() if isinstance(error, kind)), None)


def v0_3_error(error: A2AError) -> dict[str, Any]:
    """The 0.3 JSON-RPC error object of `error`."""
    answer: dict[str, Any] = {"code": rpc_code(error) or _INTERNAL_CODE, "message": error.message}
    if error.data is not None:
        answer["data"] = error.data
    return answer


def finish_v0_3_error(error: dict[str, Any], failure: A2AError | None) -> dict[str, Any]:
    """A 0.3 JSON-RPC error object from the SDK's 0.3 layer, told `failure`, the error the handler raised."""
    answer = {key: value for key, value in error.items() if not (key == "data" and value is None)}
    if answer.get("code") != _INTERNAL_CODE:
        return answer
    code = rpc_code(failure) if failure is not None else None
    if code is not None and code != _INTERNAL_CODE:
        # A 1.0 addition the SDK's 0.3 layer folded into InternalError: its own code and message.
        answer["code"] = code
    elif not isinstance(failure, InternalError):
        # An unexpected exception: its text is for the server log, not for the client.
        answer["message"] = INTERNAL_MESSAGE
        answer.pop("data", None)
    return answer


def _has_error_info(details: Any) -> bool:
    return isinstance(details, list) and any(
        isinstance(detail, dict) and detail.get("@type") == ERROR_INFO_TYPE for detail in details
    )


def _error_info(reason: str, data: Any) -> dict[str, Any]:
    metadata = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    return {"@type": ERROR_INFO_TYPE, "reason": reason, "domain": A2A_DOMAIN, "metadata": metadata}


def with_error_info(error: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 JSON-RPC error object with an ErrorInfo naming its reason (the SDK's own errors lack one)."""
    code = error.get("code")
    reason = _STANDARD_REASONS.get(code) if isinstance(code, int) else None
    if reason is None or _has_error_info(error.get("data")):
        return error
    answer = {**error, "data": [_error_info(reason, error.get("data"))]}
    if reason == _INTERNAL_REASON:
        # An unexpected exception: its text is for the server log, not for the client.
        answer["message"] = INTERNAL_MESSAGE
    return answer


def rest_with_error_info(response: Response) -> Response:
    """An HTTP+JSON error the SDK built without ErrorInfo (an unexpected exception), given one."""
    if response.status_code < 400 or not isinstance(response, JSONResponse):
        return response
    body = json.loads(bytes(response.body))
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return response
    reason = _REST_REASONS.get(str(error.get("status")))
    if reason is None or _has_error_info(error.get("details")):
        return response
    error["details"] = [_error_info(reason, None)]
    if reason == _INTERNAL_REASON:
        error["message"] = INTERNAL_MESSAGE
    return JSONResponse(body, status_code=response.status_code, media_type=response.media_type)


def rest_error(error: A2AError) -> JSONResponse:
    """The HTTP+JSON answer of `error`: its status and `{"error": <google.rpc.Status>}`."""
    payload = build_rest_error_payload(error)
    return JSONResponse(payload, status_code=payload["error"]["code"], media_type="application/json")


def rest_typed(response: Response, version: ProtocolVersion) -> Response:
    """A 0.3 HTTP+JSON error with its `type` and `message` beside the `google.rpc.Status` (see the module)."""
    if version is not ProtocolVersion.V0_3 or response.status_code < 400:
        return response
    if not isinstance(response, JSONResponse):
        return response
    body = json.loads(bytes(response.body))
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    reasons = [
        detail.get("reason")
        for detail in details or []
        if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO_TYPE
    ]
    reason = reasons[0] if reasons else None
    kind = _V0_3_ERROR_TYPES.get(reason) if isinstance(reason, str) else None
    if kind is None or not isinstance(error, dict):
        return response
    body.update(type=kind, message=error.get("message", ""))
    return JSONResponse(body, status_code=response.status_code, media_type=response.media_type)
