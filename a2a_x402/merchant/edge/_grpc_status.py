"""A2A errors in the gRPC binding's form: a `google.rpc.Status` carrying a `google.rpc.ErrorInfo`.

The status code and ErrorInfo `reason` follow the A2A v1.0.1 table (`a2a.utils.errors.A2A_ERROR_MAPPING`, the
same table the HTTP+JSON binding answers from), the domain is `a2a-protocol.org`, and the ErrorInfo
`metadata` is the error's `data`, as on the other bindings. The serialized Status travels in the
`grpc-status-details-bin` trailer beside the plain status code and message.

Two things the a2a-sdk 1.3 gRPC handler does differently, and which are why this module exists: it looks the
error's class up exactly, so a subclass of an A2A error is answered UNKNOWN, and it drops the error's `data`.
An error outside the table is answered INTERNAL, "Internal error": its text is for the server log.
"""

from __future__ import annotations

from typing import Any, NoReturn

import grpc
import grpc.aio
from a2a.utils.error_handlers import A2A_DOMAIN
from a2a.utils.errors import A2A_ERROR_MAPPING, A2AError, ErrorMapping, InvalidParamsError
from a2a.utils.grpc_status import status_to_grpc
from a2a.utils.proto_utils import validation_errors_to_bad_request
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

__all__ = ["INTERNAL_MESSAGE", "abort_with", "status_of"]

INTERNAL_MESSAGE = "Internal error"
_INTERNAL = ErrorMapping(500, "INTERNAL", "INTERNAL_ERROR")
# The validation details of an InvalidParams go into a BadRequest, not into the ErrorInfo metadata.
_VALIDATION_KEY = "errors"


def _mapping(error: A2AError) -> ErrorMapping | None:
    return next((mapping for kind, mapping in A2A_ERROR_MAPPING.items() if isinstance(error, kind)), None)


def _metadata(error: A2AError) -> dict[str, str]:
    """`error.data` as ErrorInfo metadata (a string map): its scalar members, written as text."""
    if not isinstance(error.data, dict):
        return {}
    return {
        str(key): str(value)
        for key, value in error.data.items()
        if key != _VALIDATION_KEY and isinstance(value, str | int | float | bool)
    }


def _packed(detail: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed


def status_of(error: A2AError) -> status_pb2.Status:
    """The `google.rpc.Status` answering `error` on the gRPC binding (see the module)."""
    mapping = _mapping(error)
    message = error.message if mapping is not None else INTERNAL_MESSAGE
    mapping = mapping or _INTERNAL
    info = error_details_pb2.ErrorInfo(reason=mapping.reason, domain=A2A_DOMAIN, metadata=_metadata(error))
    status = status_pb2.Status(code=grpc.StatusCode[mapping.grpc_status].value[0], message=message)
    status.details.append(_packed(info))
    violations = error.data.get(_VALIDATION_KEY) if isinstance(error.data, dict) else None
    if isinstance(error, InvalidParamsError) and violations:
        status.details.append(_packed(validation_errors_to_bad_request(violations)))
    return status


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], error: A2AError) -> NoReturn:
    """End the call on `context` with `error` (the status code, message and details trailer).

    Raises:
        grpc.aio.AbortError: always (that is how grpc.aio ends a call); let it propagate.
    """
    answer = status_to_grpc(status_of(error))
    trailing = tuple(context.trailing_metadata() or ())
    context.set_trailing_metadata((*trailing, *answer.trailing_metadata))
    await context.abort(answer.code, answer.details)
