"""One error table (A2A spec v1.0.1 §5.4 / a2a-sdk ≥ 1.0.3), every error triggered on both 1.0 bindings.

Each row names the A2A error (or standard JSON-RPC error), its JSON-RPC code, HTTP status, `google.rpc`
status and ErrorInfo reason; each is caused for real through the edge (the `MembersOnly` layer stands in for
a layer that needs an extension) and checked on the wire: JSON-RPC envelope and `error.data` ErrorInfo,
HTTP+JSON `google.rpc.Status` with ErrorInfo `details`, the `a2a-protocol.org` domain, and media types.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import pytest

from merchant.edge import JSONRPC_PATH, REST_PATH

from .wire import JSON, mid, user_message

_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEADERS = {"A2A-Version": "1.0"}
_PRECONDITION = "FAILED_PRECONDITION"


@dataclass(frozen=True)
class Row:
    """How an error appears on each binding."""

    reason: str
    rpc_code: int
    http_status: int
    grpc_status: str


TABLE = {
    "TaskNotFound": Row("TASK_NOT_FOUND", -32001, 404, "NOT_FOUND"),
    "TaskNotCancelable": Row("TASK_NOT_CANCELABLE", -32002, 400, _PRECONDITION),
    "PushNotificationNotSupported": Row("PUSH_NOTIFICATION_NOT_SUPPORTED", -32003, 400, _PRECONDITION),
    "UnsupportedOperation": Row("UNSUPPORTED_OPERATION", -32004, 400, _PRECONDITION),
    "ContentTypeNotSupported": Row("CONTENT_TYPE_NOT_SUPPORTED", -32005, 400, "INVALID_ARGUMENT"),
    "InvalidAgentResponse": Row("INVALID_AGENT_RESPONSE", -32006, 500, "INTERNAL"),
    "ExtendedAgentCardNotConfigured": Row("EXTENDED_AGENT_CARD_NOT_CONFIGURED", -32007, 400, _PRECONDITION),
    "ExtensionSupportRequired": Row("EXTENSION_SUPPORT_REQUIRED", -32008, 400, _PRECONDITION),
    "VersionNotSupported": Row("VERSION_NOT_SUPPORTED", -32009, 400, _PRECONDITION),
    "InvalidParams": Row("INVALID_PARAMS", -32602, 400, "INVALID_ARGUMENT"),
    "Internal": Row("INTERNAL_ERROR", -32603, 500, "INTERNAL"),
}
# The standard JSON-RPC errors that exist on JSON-RPC only (HTTP+JSON has no envelope or method name).
JSONRPC_ONLY = {
    "JSONParse": Row("JSON_PARSE", -32700, 200, ""),
    "InvalidRequest": Row("INVALID_REQUEST", -32600, 200, ""),
    "MethodNotFound": Row("METHOD_NOT_FOUND", -32601, 200, ""),
}


class Binding:
    """Raw calls on one binding: `call(operation, params)` returns the HTTP response as it came."""

    def __init__(self, name: str, http: httpx.AsyncClient) -> None:
        self.name = name
        self.http = http

    async def call(
        self, operation: str, params: JSON, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        headers = {**_HEADERS, **(headers or {})}
        if self.name == "jsonrpc":
            envelope = {"jsonrpc": "2.0", "id": "e-1", "method": operation, "params": params}
            return await self.http.post(JSONRPC_PATH, json=envelope, headers=headers)
        method, path, body = _REST[operation](params)
        return await self.http.request(method, REST_PATH + path, json=body, headers=headers)

    async def result(self, operation: str, params: JSON) -> JSON:
        response = await self.call(operation, params)
        body: JSON = response.json()
        return body["result"] if self.name == "jsonrpc" else body


_REST: dict[str, Callable[[JSON], tuple[str, str, JSON | None]]] = {
    "SendMessage": lambda p: ("POST", "/message:send", p),
    "GetTask": lambda p: ("GET", f"/tasks/{p['id']}", None),
    "CancelTask": lambda p: ("POST", f"/tasks/{p['id']}:cancel", None),
    "CreateTaskPushNotificationConfig": lambda p: (
        "POST",
        f"/tasks/{p['taskId']}/pushNotificationConfigs",
        {"url": p["url"]},
    ),
    "GetExtendedAgentCard": lambda p: ("GET", "/extendedAgentCard", None),
}


def send(text: str, **fields: str) -> JSON:
    """SendMessage params for one user text."""
    return {"message": user_message(text, message_id=mid(), **fields)}


async def _completed_task(binding: Binding) -> str:
    task_id: str = (await binding.result("SendMessage", send("hello")))["task"]["id"]
    return task_id


async def _canceled_task(binding: Binding) -> str:
    task_id: str = (await binding.result("SendMessage", send("quote")))["task"]["id"]
    await binding.call("CancelTask", {"id": task_id})
    return task_id


Trigger = Callable[[Binding], Awaitable[httpx.Response]]


async def _not_cancelable(binding: Binding) -> httpx.Response:
    return await binding.call("CancelTask", {"id": await _canceled_task(binding)})


async def _push(binding: Binding) -> httpx.Response:
    task_id = await _completed_task(binding)
    return await binding.call(
        "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": "https://h.example/a"}
    )


async def _to_terminal(binding: Binding) -> httpx.Response:
    return await binding.call("SendMessage", send("again", task_id=await _completed_task(binding)))


async def _content_type(binding: Binding) -> httpx.Response:
    params = send("look")
    params["message"]["parts"] = [{"raw": "iVBORw==", "mediaType": "image/png"}]
    return await binding.call("SendMessage", params)


TRIGGERS: dict[str, Trigger] = {
    "TaskNotFound": lambda b: b.call("GetTask", {"id": str(uuid.uuid4())}),
    "TaskNotCancelable": _not_cancelable,
    "PushNotificationNotSupported": _push,
    "UnsupportedOperation": _to_terminal,
    "ContentTypeNotSupported": _content_type,
    "InvalidAgentResponse": lambda b: b.call("SendMessage", send("bad-response")),
    "ExtendedAgentCardNotConfigured": lambda b: b.call("GetExtendedAgentCard", {}),
    "ExtensionSupportRequired": lambda b: b.call("SendMessage", send("members-only")),
    "VersionNotSupported": lambda b: b.call("GetTask", {"id": str(uuid.uuid4())}, {"A2A-Version": "1.7"}),
    "InvalidParams": lambda b: b.call("SendMessage", send("hello", task_id="x" * 37)),
    "Internal": lambda b: b.call("SendMessage", send("explode")),
}


def error_info(details: list[JSON]) -> JSON:
    """The one ErrorInfo among `details`, checked for the A2A domain."""
    [info] = [detail for detail in details if detail.get("@type") == _ERROR_INFO]
    assert info["domain"] == "a2a-protocol.org"
    return info


@pytest.mark.parametrize("binding_name", ["jsonrpc", "rest"])
@pytest.mark.parametrize("error", sorted(TABLE))
async def test_every_a2a_error_on_every_binding(shared_merchant: str, binding_name: str, error: str) -> None:
    row = TABLE[error]
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=10) as http:
        response = await TRIGGERS[error](Binding(binding_name, http))

    assert response.headers["content-type"] == "application/json"
    if binding_name == "jsonrpc":
        assert response.status_code == 200
        body = response.json()
        assert (body["jsonrpc"], body["id"]) == ("2.0", "e-1")
        assert body["error"]["code"] == row.rpc_code
        assert error_info(body["error"]["data"])["reason"] == row.reason
    else:
        assert response.status_code == row.http_status
        status = response.json()["error"]
        assert (status["code"], status["status"]) == (row.http_status, row.grpc_status)
        assert status["message"]
        assert error_info(status["details"])["reason"] == row.reason


@pytest.mark.parametrize(
    ("error", "body"),
    [
        ("JSONParse", b'{"jsonrpc": "2.0", "id": 1, "method": '),
        ("InvalidRequest", b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {}}'),
        ("MethodNotFound", b'{"jsonrpc": "2.0", "id": 1, "method": "GetTasks", "params": {}}'),
    ],
)
async def test_standard_jsonrpc_errors_name_their_reason(
    shared_merchant: str, error: str, body: bytes
) -> None:
    row = JSONRPC_ONLY[error]
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=10) as http:
        response = await http.post(
            JSONRPC_PATH, content=body, headers={**_HEADERS, "content-type": "application/json"}
        )

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    assert answer["error"]["code"] == row.rpc_code
    assert error_info(answer["error"]["data"])["reason"] == row.reason
    assert response.headers["a2a-version"] == "1.0"


async def test_success_media_types(shared_merchant: str) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=10) as http:
        task_id = await _completed_task(Binding("rest", http))
        rest = await Binding("rest", http).call("GetTask", {"id": task_id})
        rpc = await Binding("jsonrpc", http).call("GetTask", {"id": task_id})

    assert rest.status_code == 200
    assert rest.headers["content-type"] == "application/a2a+json"
    assert rpc.headers["content-type"] == "application/json"
    assert rest.json() == rpc.json()["result"]


async def test_rest_body_that_is_not_json(shared_merchant: str) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=10) as http:
        response = await http.post(
            REST_PATH + "/message:send",
            content=b'{"message": ',
            headers={**_HEADERS, "content-type": "application/a2a+json"},
        )

    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    status = response.json()["error"]
    assert (status["code"], status["status"]) == (400, "INVALID_ARGUMENT")
    assert error_info(status["details"])["reason"] == "INVALID_REQUEST"


async def test_both_bindings_answer_every_error_alike(shared_merchant: str) -> None:
    answers: dict[str, list[tuple[str, str, str]]] = {}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=10) as http:
        for name in ("jsonrpc", "rest"):
            binding = Binding(name, http)
            for error in sorted(TABLE):
                body = (await TRIGGERS[error](binding)).json()["error"]
                details = body["data"] if name == "jsonrpc" else body["details"]
                message = _UUID.sub("<id>", body["message"])
                answers.setdefault(name, []).append((error, error_info(details)["reason"], message))

    assert answers["jsonrpc"] == answers["rest"]
    assert [reason for _, reason, _ in answers["rest"]] == [TABLE[error].reason for error in sorted(TABLE)]
