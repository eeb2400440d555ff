"""A2A calls over one interface of the card, answers kept as the merchant sent them.

``Wire`` speaks what a client of the interface could send and nothing else: A2A 1.0 over JSON-RPC,
HTTP+JSON (tenant as the path segment) and gRPC (``_grpc``), and A2A 0.3 over JSON-RPC (``message/send``)
and HTTP+JSON (``/v1/message:send``). Every call returns a ``Reply``: the result, or the error reduced to
what the checks compare (JSON-RPC code, HTTP status, gRPC status, ``ErrorInfo`` reason), the answer's
headers and the exchange for evidence. A merchant that answers nonsense raises ``MerchantFault``.
"""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import urlencode

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02

from ._card import Interface
from ._grpc import GrpcWire
from ._http import Exchange, MerchantFault, UntrustedHttp
from ._reply import ErrorAnswer, Reply

__all__ = ["ErrorAnswer", "Reply", "Wire"]

JSON = Any
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_METHODS_0_3 = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
}


class Wire:
    """The A2A calls of one interface, with or without the extension activated."""

    def __init__(
        self,
        http: UntrustedHttp,
        interface: Interface,
        *,
        timeout_s: float,
        max_bytes: int,
        credential: str | None = None,
    ) -> None:
        self.interface = interface
        self._credential = credential
        self._http = http
        self._ids = itertools.count(1)
        self._grpc = GrpcWire(interface, timeout_s=timeout_s, max_bytes=max_bytes)

    def headers(self, extensions: str | None) -> dict[str, str]:
        """The service parameters a client of this interface sends, activating ``extensions`` (a URI list)."""
        if self.interface.version == "1.0":
            headers = {"A2A-Version": "1.0"}
            if extensions is not None:
                headers["A2A-Extensions"] = extensions
            if self._credential is not None:
                headers["Authorization"] = f"Bearer {self._credential}"
            return headers
        headers = {"A2A-Version": "0.3"}
        if extensions is not None:
            headers["X-A2A-Extensions"] = extensions
        if self._credential is not None:
            headers["Authorization"] = f"Bearer {self._credential}"
        return headers

    @property
    def uri(self) -> str:
        """The URI that activates the extension on this interface's version."""
        return EXTENSION_URI if self.interface.version == "1.0" else EXTENSION_URI_V02

    async def send(self, message: JSON, *, activate: str | None = "", request_metadata: JSON = None) -> Reply:
        """SendMessage (``message/send``); ``activate``: the URI list (``""``: this version's; None: none)."""
        params: JSON = {"message": message}
        if self.interface.version == "0.3":
            # A2A 0.3 gives `blocking` no default (its proto reads an absent bool as false): ask to wait.
            params["configuration"] = {"blocking": True}
        if request_metadata is not None:
            params["metadata"] = request_metadata
        return await self._unary("SendMessage", params, "/message:send", "POST", activate)

    async def get_task(self, task_id: str) -> Reply:
        """GetTask (``tasks/get``), activated."""
        return await self._unary("GetTask", {"id": task_id}, f"/tasks/{task_id}", "GET", "")

    async def cancel(self, task_id: str) -> Reply:
        """CancelTask (A2A 1.0 interfaces)."""
        return await self._unary("CancelTask", {"id": task_id}, f"/tasks/{task_id}:cancel", "POST", "")

    async def list_tasks(self, context_id: str | None = None) -> Reply:
        """ListTasks (A2A 1.0 interfaces), with no filter or within `context_id`."""
        if context_id is None:
            return await self._unary("ListTasks", {}, "/tasks", "GET", "")
        query = urlencode({"contextId": context_id})
        return await self._unary("ListTasks", {"contextId": context_id}, f"/tasks?{query}", "GET", "")

    async def stream(self, message: JSON) -> Reply:
        """SendStreamingMessage (``message/stream``), activated; every event until the server closes."""
        headers = self.headers(self.uri)
        if self.interface.binding == "GRPC":
            return await self._grpc.call("SendStreamingMessage", {"message": message}, headers, stream=True)
        events: list[JSON] = []
        if self.interface.binding == "JSONRPC":
            envelope = self._envelope("SendStreamingMessage", {"message": message})
            answer = await self._http.stream_events(
                self.interface.url, headers=headers, body=envelope, events=events
            )
        else:
            url = self._rest_url("/message:stream")
            answer = await self._http.stream_events(
                url, headers=headers, body={"message": message}, events=events
            )
        reply = Reply(headers={k.lower(): v for k, v in answer.headers.items()}, exchange=answer.exchange)
        if answer.body is not None:
            reply.error = self._error(answer.status, answer.body, answer.exchange)
            return reply
        for event in events:
            if self.interface.binding == "JSONRPC":
                if not isinstance(event, dict) or "result" not in event:
                    reply.error = self._error(answer.status, event, answer.exchange)
                    return reply
                event = event["result"]
            reply.events.append(event)
        return reply

    def _envelope(self, method: str, params: JSON) -> JSON:
        if self.interface.version == "0.3":
            return {"jsonrpc": "2.0", "id": next(self._ids), "method": _METHODS_0_3[method], "params": params}
        if self.interface.tenant:
            params = {"tenant": self.interface.tenant, **params}
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def _rest_url(self, path: str) -> str:
        base = self.interface.url.rstrip("/")
        if self.interface.version == "0.3":
            return f"{base}/v1{path}"
        return f"{base}/{self.interface.tenant}{path}" if self.interface.tenant else base + path

    async def _unary(self, method: str, params: JSON, path: str, verb: str, activate: str | None) -> Reply:
        headers = self.headers(self.uri if activate == "" else activate)
        if self.interface.binding == "GRPC":
            return await self._grpc.call(method, params, headers, stream=False)
        if self.interface.binding == "JSONRPC":
            envelope = self._envelope(method, params)
            answer = await self._http.request("POST", self.interface.url, headers=headers, body=envelope)
            reply = Reply(headers={k.lower(): v for k, v in answer.headers.items()}, exchange=answer.exchange)
            body = answer.body
            if not isinstance(body, dict) or body.get("id") != envelope["id"]:
                raise MerchantFault("the answer is not a JSON-RPC response to the request", answer.exchange)
            if "result" in body:
                reply.result = body["result"]
            else:
                reply.error = self._error(answer.status, body, answer.exchange)
            return reply
        body = params if verb == "POST" else None
        answer = await self._http.request(verb, self._rest_url(path), headers=headers, body=body)
        reply = Reply(headers={k.lower(): v for k, v in answer.headers.items()}, exchange=answer.exchange)
        if answer.status == 200:
            reply.result = answer.body
        else:
            reply.error = self._error(answer.status, answer.body, answer.exchange)
        return reply

    def _error(self, status: int, body: JSON, exchange: Exchange) -> ErrorAnswer:
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            if self.interface.binding == "HTTP+JSON" and status >= 400:
                return ErrorAnswer(http_status=status)
            raise MerchantFault("the answer is neither a result nor an A2A error", exchange)
        details = error.get("data") if self.interface.binding == "JSONRPC" else error.get("details")
        reason, info = "", {}
        for detail in details if isinstance(details, list) else []:
            if (
                isinstance(detail, dict)
                and detail.get("@type") == _ERROR_INFO
                and isinstance(detail.get("reason"), str)
            ):
                reason = detail["reason"]
                metadata = detail.get("metadata")
                if isinstance(metadata, dict):
                    info = {k: v for k, v in metadata.items() if isinstance(k, str) and isinstance(v, str)}
                break
        if isinstance(details, dict):  # A2A 0.3 JSON-RPC: the error's data object, without ErrorInfo
            info = {k: v for k, v in details.items() if isinstance(k, str) and isinstance(v, str)}
        code = error.get("code") if self.interface.binding == "JSONRPC" else None
        message = str(error["message"]) if isinstance(error.get("message"), str) else ""
        return ErrorAnswer(
            code=code if isinstance(code, int) else None,
            http_status=status,
            reason=reason,
            message=message,
            info=info,
        )
