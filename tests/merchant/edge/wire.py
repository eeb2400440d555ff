"""Raw-HTTP A2A 1.0 calls for the edge tests, one class per binding with the same methods.

Results come back exactly as ProtoJSON on the wire (the JSON-RPC envelope removed), and errors as an
`A2ACallError` holding the HTTP status and the ErrorInfo `reason`, so one test can run the same scenario on
both bindings and compare what the server said. The checks at the end are shared by the edge tests.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest

from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from tests.fixtures.merchant import A2ACallError

JSON = dict[str, Any]
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def user_message(text: str, *, message_id: str, task_id: str = "", context_id: str = "") -> JSON:
    """A ROLE_USER message with one text part, in ProtoJSON."""
    message: JSON = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


async def _sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event type, data) for each SSE event."""
    event = "message"
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith("event:"):
            event = line[6:].strip()


class JsonRpc:
    """The JSON-RPC binding: `POST /a2a/jsonrpc`, tenant in `params.tenant`."""

    name = "jsonrpc"

    def __init__(self, http: httpx.AsyncClient, tenant: str = "") -> None:
        self._http = http
        self._tenant = tenant
        self._ids = itertools.count(1)

    def _envelope(self, method: str, params: JSON) -> JSON:
        if self._tenant:
            params = {"tenant": self._tenant, **params}
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    @staticmethod
    def _failure(http_status: int, body: JSON) -> A2ACallError:
        error = body["error"]
        infos = [d for d in error.get("data") or [] if d.get("@type") == _ERROR_INFO]
        return A2ACallError(http_status, error["code"], infos[0]["reason"] if infos else "", error["message"])

    async def call(self, method: str, params: JSON) -> JSON:
        """One unary call; returns `result` or raises `A2ACallError`."""
        request = self._envelope(method, params)
        response = await self._http.post(JSONRPC_PATH, json=request)
        body = response.json()
        assert response.status_code == 200, body
        assert body["jsonrpc"] == "2.0" and body["id"] == request["id"]
        if "error" in body:
            raise self._failure(response.status_code, body)
        result: JSON = body["result"]
        return result

    async def send(self, message: JSON, configuration: JSON | None = None) -> JSON:
        params: JSON = {"message": message}
        if configuration is not None:
            params["configuration"] = configuration
        return await self.call("SendMessage", params)

    async def get_task(self, task_id: str, history_length: int | None = None) -> JSON:
        params: JSON = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        return await self.call("GetTask", params)

    async def list_tasks(self, **params: Any) -> JSON:
        return await self.call("ListTasks", params)

    async def cancel(self, task_id: str) -> JSON:
        return await self.call("CancelTask", {"id": task_id})

    @asynccontextmanager
    async def _stream_call(self, method: str, params: JSON) -> AsyncIterator[AsyncIterator[JSON]]:
        request = self._envelope(method, params)
        async with self._http.stream("POST", JSONRPC_PATH, json=request) as response:
            if not response.headers["content-type"].startswith("text/event-stream"):
                await response.aread()
                raise self._failure(response.status_code, response.json())

            async def events() -> AsyncIterator[JSON]:
                async for kind, data in _sse_events(response.aiter_lines()):
                    body = json.loads(data)
                    assert body["jsonrpc"] == "2.0" and body["id"] == request["id"], body
                    if kind == "error" or "error" in body:
                        raise self._failure(response.status_code, body)
                    yield body["result"]

            yield events()

    async def stream(self, message: JSON) -> list[JSON]:
        """SendStreamingMessage; every event until the server closes the stream."""
        async with self._stream_call("SendStreamingMessage", {"message": message}) as events:
            return [event async for event in events]

    def subscribe(self, task_id: str) -> AbstractAsyncContextManager[AsyncIterator[JSON]]:
        """SubscribeToTask; the events as they arrive, while the block is open."""
        return self._stream_call("SubscribeToTask", {"id": task_id})


class Rest:
    """The HTTP+JSON binding under `/a2a/rest`, tenant as the path segment after it."""

    name = "rest"

    def __init__(self, http: httpx.AsyncClient, tenant: str = "", subscribe_method: str = "POST") -> None:
        self._http = http
        self._root = f"{REST_PATH}/{tenant}" if tenant else REST_PATH
        self._subscribe_method = subscribe_method

    @staticmethod
    def _failure(http_status: int, body: JSON) -> A2ACallError:
        error = body["error"]
        infos = [d for d in error.get("details") or [] if d.get("@type") == _ERROR_INFO]
        assert error["code"] == http_status, body
        return A2ACallError(http_status, None, infos[0]["reason"] if infos else "", error["message"])

    async def _unary(
        self, method: str, path: str, *, body: JSON | None = None, query: Mapping[str, Any] | None = None
    ) -> JSON:
        response = await self._http.request(method, self._root + path, json=body, params=query)
        payload: JSON = response.json()
        if response.status_code != 200:
            raise self._failure(response.status_code, payload)
        assert response.headers["content-type"] == "application/a2a+json", response.headers
        return payload

    async def send(self, message: JSON, configuration: JSON | None = None) -> JSON:
        body: JSON = {"message": message}
        if configuration is not None:
            body["configuration"] = configuration
        return await self._unary("POST", "/message:send", body=body)

    async def get_task(self, task_id: str, history_length: int | None = None) -> JSON:
        query = {"historyLength": history_length} if history_length is not None else None
        return await self._unary("GET", f"/tasks/{task_id}", query=query)

    async def list_tasks(self, **params: Any) -> JSON:
        return await self._unary("GET", "/tasks", query=params)

    async def cancel(self, task_id: str) -> JSON:
        return await self._unary("POST", f"/tasks/{task_id}:cancel")

    @asynccontextmanager
    async def _stream_call(
        self, method: str, path: str, body: JSON | None
    ) -> AsyncIterator[AsyncIterator[JSON]]:
        async with self._http.stream(method, self._root + path, json=body) as response:
            if not response.headers["content-type"].startswith("text/event-stream"):
                await response.aread()
                raise self._failure(response.status_code, response.json())

            async def events() -> AsyncIterator[JSON]:
                async for kind, data in _sse_events(response.aiter_lines()):
                    payload = json.loads(data)
                    if kind == "error":
                        raise self._failure(payload["error"]["code"], payload)
                    yield payload

            yield events()

    async def stream(self, message: JSON) -> list[JSON]:
        """message:stream; every event until the server closes the stream."""
        async with self._stream_call("POST", "/message:stream", {"message": message}) as events:
            return [event async for event in events]

    def subscribe(self, task_id: str) -> AbstractAsyncContextManager[AsyncIterator[JSON]]:
        """tasks/{id}:subscribe (POST, or GET if so configured); the events as they arrive."""
        return self._stream_call(self._subscribe_method, f"/tasks/{task_id}:subscribe", None)


Wire = JsonRpc | Rest
BINDINGS = ("jsonrpc", "rest")


def binding(name: str, http: httpx.AsyncClient, tenant: str = "") -> Wire:
    """The binding called `name` ("jsonrpc" or "rest") for `tenant`."""
    return JsonRpc(http, tenant) if name == "jsonrpc" else Rest(http, tenant)


def walk_keys(value: Any) -> Iterator[str]:
    """Every dict key anywhere inside `value` (to assert that 0.3 fields such as `kind` never appear)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from walk_keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from walk_keys(inner)


# (HTTP status, JSON-RPC code) of an A2A error per binding.
NOT_FOUND = {"jsonrpc": (200, -32001), "rest": (404, None)}
INVALID_PARAMS = {"jsonrpc": (200, -32602), "rest": (400, None)}
NOT_CANCELABLE = {"jsonrpc": (200, -32002), "rest": (400, None)}
UNSUPPORTED = {"jsonrpc": (200, -32004), "rest": (400, None)}


def mid() -> str:
    """A fresh message id."""
    return f"msg-{uuid.uuid4()}"


def assert_failure(
    failure: pytest.ExceptionInfo[A2ACallError],
    wire: Wire,
    reason: str,
    codes: dict[str, tuple[int, int | None]],
) -> None:
    """The error carries `reason` and the binding's status/code for it."""
    assert failure.value.reason == reason
    assert (failure.value.http_status, failure.value.rpc_code) == codes[wire.name]


def assert_protojson_1_0(payload: object) -> None:
    """No 0.3 leftovers anywhere: no `kind` discriminator, no `final` flag."""
    keys = set(walk_keys(payload))
    assert "kind" not in keys
    assert "final" not in keys


async def start_quote(wire: Wire) -> JSON:
    """Send "quote" and return the task, which waits for input."""
    response = await wire.send(user_message("quote", message_id=mid()))
    assert list(response) == ["task"]
    task: JSON = response["task"]
    return task
