"""A2A 1.0 over gRPC for the kit: the request built from ProtoJSON, the answer turned back into ProtoJSON.

Service parameters travel as metadata (``a2a-version``, ``a2a-extensions``), the tenant in the request.
Each call opens its own channel with a deadline and a receive-size cap, so a hanging or flooding server
ends in a ``MerchantFault``. A request the merchant's answer cannot be parsed into (a unknown member) is the
kit's own problem and cannot happen: the kit writes only A2A 1.0 members.

``Struct`` metadata has only doubles, so integral numbers come back as ``2.0``; the answer is written with
integral numbers as integers, the form the checks compare (§5.3 lets a receiver accept both).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import grpc
import grpc.aio
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.grpc_status import status_from_call
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.message import Message
from google.rpc import error_details_pb2

from ._card import Interface
from ._http import Exchange, MerchantFault, trim
from ._reply import ErrorAnswer, Reply

__all__ = ["GrpcWire"]

JSON = Any
_REQUESTS: dict[str, type[Message]] = {
    "SendMessage": a2a_pb2.SendMessageRequest,
    "SendStreamingMessage": a2a_pb2.SendMessageRequest,
    "GetTask": a2a_pb2.GetTaskRequest,
    "ListTasks": a2a_pb2.ListTasksRequest,
    "CancelTask": a2a_pb2.CancelTaskRequest,
}


def _integral(value: JSON) -> JSON:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _target(url: str) -> str:
    for prefix in ("grpc://", "grpcs://", "http://", "https://", "dns:///"):
        if url.startswith(prefix):
            return url[len(prefix) :].rstrip("/")
    return url


class GrpcWire:
    """Unary and server-streaming A2A calls on one gRPC interface."""

    def __init__(self, interface: Interface, *, timeout_s: float, max_bytes: int) -> None:
        self._interface = interface
        self._timeout_s = timeout_s
        self._options = [("grpc.max_receive_message_length", max_bytes)]

    async def call(self, method: str, params: JSON, headers: Mapping[str, str], *, stream: bool) -> Reply:
        """One call; its ``Reply``."""
        body = {"tenant": self._interface.tenant, **params} if self._interface.tenant else params
        metadata = [(name.lower(), value) for name, value in headers.items()]
        shown_metadata = {name: value for name, value in metadata if name != "authorization"}  # a credential
        exchange = Exchange(
            trim(f"gRPC {method} {self._interface.url} {json.dumps(shown_metadata)} {json.dumps(body)}")
        )
        try:
            request = ParseDict(body, _REQUESTS[method]())
        except ParseError as error:
            raise MerchantFault(f"the kit could not build the request: {error}", exchange) from None
        reply = Reply(exchange=exchange)
        async with grpc.aio.insecure_channel(_target(self._interface.url), options=self._options) as channel:
            stub: Any = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            rpc = getattr(stub, method)(request, metadata=metadata, timeout=self._timeout_s)
            try:
                if stream:
                    async for answer in rpc:
                        reply.events.append(_integral(MessageToDict(answer)))
                else:
                    reply.result = _integral(MessageToDict(await rpc))
                initial = await rpc.initial_metadata()
            except grpc.aio.AioRpcError as error:
                reason, info = _error_info(error)
                reply.error = ErrorAnswer(
                    grpc_status=error.code().name, reason=reason, message=error.details() or "", info=info
                )
                initial = error.initial_metadata()
            reply.headers = {key.lower(): str(value) for key, value in (initial or ())}
        shown = reply.events if stream else reply.result
        exchange.answer = trim(
            f"{reply.error.grpc_status} {reply.error.reason} {reply.error.message}"
            if reply.error
            else f"OK {json.dumps(reply.headers)} {json.dumps(shown)}"
        )
        return reply


def _error_info(error: grpc.aio.AioRpcError) -> tuple[str, dict[str, str]]:
    """The ``ErrorInfo`` reason and metadata of the status details (empty: there is none)."""
    try:
        status = status_from_call(error)
    except Exception:  # noqa: BLE001 - an undecodable status detail is simply no reason
        return "", {}
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info.reason, dict(info.metadata)
    return "", {}
