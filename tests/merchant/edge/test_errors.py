"""One error table (A2A spec v1.0.1 §5.4 / a2a-sdk ≥ 1.0.3), every error triggered on the three 1.0 bindings.

Each row names the A2A error (or standard JSON-RPC error), its JSON-RPC code, HTTP status, `google.rpc`
status and ErrorInfo reason; each is caused for real through the edge (the `MembersOnly` layer stands in for
a layer that needs an extension) and checked on the wire: JSON-RPC envelope and `error.data` ErrorInfo,
HTTP+JSON `google.rpc.Status` with ErrorInfo `details`, gRPC status with the `google.rpc.Status` in its
trailer, the `a2a-protocol.org` domain, and media types. gRPC gives the same message as HTTP+JSON.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar

import httpx
import pytest

from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from tests.fixtures.a2a_errors import A2ACallError
from tests.fixtures.a2a_grpc import GrpcCalls
from tests.fixtures.deadlines import HANG_S

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

    version_headers: ClassVar[dict[str, str]] = _HEADERS
    rest_root: ClassVar[str] = REST_PATH

    def __init__(self, name: str, http: httpx.AsyncClient) -> None:
        self.name = name
        self.http = http

    def method(self, operation: str) -> str:
        """The JSON-RPC method of `operation`."""
        return operation

    def route(self, operation: str, params: JSON) -> tuple[str, str, JSON | None]:
        """The HTTP+JSON (method, path under `rest_root`, body) of `operation`."""
        return _REST[operation](params)

    async def call(
        self, operation: str, params: JSON, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        headers = {**self.version_headers, **(headers or {})}
        if self.name == "jsonrpc":
            envelope = {"jsonrpc": "2.0", "id": "e-1", "method": self.method(operation), "params": params}
            return await self.http.post(JSONRPC_PATH, json=envelope, headers=headers)
        method, path, body = self.route(operation, params)
        return await self.http.request(method, self.rest_root + path, json=body, headers=headers)

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


class GrpcBinding(Binding):
    """The same calls over gRPC: `call` returns the answer as JSON, or the error as `A2ACallError`."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        super().__init__("grpc", http)
        self._grpc = GrpcCalls(http, "")

    async def call(  # type: ignore[override]
        self, operation: str, params: JSON, headers: dict[str, str] | None = None
    ) -> JSON | A2ACallError:
        metadata = [(k.lower(), v) for k, v in {**self.version_headers, **(headers or {})}.items()]
        try:
            return await self._grpc.call(operation, params, metadata)
        except A2ACallError as exc:
            return exc

    async def result(self, operation: str, params: JSON) -> JSON:
        answer = await self.call(operation, params)
        assert isinstance(answer, dict), answer
        return answer


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
    "InvalidParams": lambda b: b.call("SendMessage", send("hello", context_id="x" * 37)),
    "Internal": lambda b: b.call("SendMessage", send("explode")),
}


BUGS = pytest.mark.error_logs("why: a layer that raises (Internal), an agent's invalid answer: bugs, logged")
"""The errors of the table that are the merchant's own bugs, caused here on purpose, and logged as such."""
ERRORS = [
    pytest.param(error, marks=BUGS) if TABLE[error].http_status == 500 else error for error in sorted(TABLE)
]


def error_info(details: list[JSON]) -> JSON:
    """The one ErrorInfo among `details`, checked for the A2A domain."""
    [info] = [detail for detail in details if detail.get("@type") == _ERROR_INFO]
    assert info["domain"] == "a2a-protocol.org"
    return info


@pytest.mark.parametrize("binding_name", ["jsonrpc", "rest"])
@pytest.mark.parametrize("error", ERRORS)
async def test_every_a2a_error_on_every_binding(shared_merchant: str, binding_name: str, error: str) -> None:
    row = TABLE[error]
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
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


@pytest.mark.parametrize("error", ERRORS)
async def test_every_a2a_error_on_grpc_as_on_http_json(shared_merchant: str, error: str) -> None:
    row = TABLE[error]
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        refused = await TRIGGERS[error](GrpcBinding(http))
        rest = (await TRIGGERS[error](Binding("rest", http))).json()["error"]

    assert isinstance(refused, A2ACallError), refused
    assert (refused.grpc_status, refused.reason) == (row.grpc_status, row.reason)
    grpc_message, rest_message = (_UUID.sub("<id>", m) for m in (refused.message, rest["message"]))
    if error == "VersionNotSupported":
        # Each names what its interface serves: HTTP+JSON 1.0 and 0.3, gRPC 1.0 only.
        assert (grpc_message, rest_message) == (
            "A2A version '1.7' is not supported; this agent serves 1.0",
            "A2A version '1.7' is not supported; this agent serves 1.0,0.3",
        )
    else:
        assert grpc_message == rest_message


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
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
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
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        task_id = await _completed_task(Binding("rest", http))
        rest = await Binding("rest", http).call("GetTask", {"id": task_id})
        rpc = await Binding("jsonrpc", http).call("GetTask", {"id": task_id})

    assert rest.status_code == 200
    assert rest.headers["content-type"] == "application/a2a+json"
    assert rpc.headers["content-type"] == "application/json"
    assert rest.json() == rpc.json()["result"]


async def test_rest_body_that_is_not_json(shared_merchant: str) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
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


@BUGS
async def test_both_bindings_answer_every_error_alike(shared_merchant: str) -> None:
    answers: dict[str, list[tuple[str, str, str]]] = {}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        for name in ("jsonrpc", "rest"):
            binding = Binding(name, http)
            for error in sorted(TABLE):
                body = (await TRIGGERS[error](binding)).json()["error"]
                details = body["data"] if name == "jsonrpc" else body["details"]
                message = _UUID.sub("<id>", body["message"])
                answers.setdefault(name, []).append((error, error_info(details)["reason"], message))

    assert answers["jsonrpc"] == answers["rest"]
    assert [reason for _, reason, _ in answers["rest"]] == [TABLE[error].reason for error in sorted(TABLE)]


# -- A2A 0.3 --------------------------------------------------------------------------------------------

# A2A 0.3 defines -32001..-32007; the 1.0 additions keep their 1.0 codes as server-defined codes (the a2a-sdk
# 0.3 compat client maps them to ExtensionSupportRequiredError and VersionNotSupportedError).
_V0_3_HEADERS = {"A2A-Version": "0.3"}
_V0_3_REST = REST_PATH + "/v1"


def message_v0_3(
    binding: str, text: str, *, task_id: str = "", context_id: str = "", file: bool = False
) -> JSON:
    """A 0.3 user message: the 0.3 JSON schema on JSON-RPC, ProtoJSON of the 0.3 proto on HTTP+JSON."""
    if binding == "jsonrpc":
        part: JSON = {"kind": "text", "text": text}
        if file:
            part = {"kind": "file", "file": {"bytes": "iVBORw==", "mimeType": "image/png"}}
        message: JSON = {"kind": "message", "messageId": mid(), "role": "user", "parts": [part]}
    else:
        # By URI: a file by bytes is refused on 0.3 HTTP+JSON (the SDK's 0.3 layer mis-decodes it).
        image = {"fileWithUri": "https://h.example/a.png", "mimeType": "image/png"}
        part = {"file": image} if file else {"text": text}
        message = {"messageId": mid(), "role": "ROLE_USER", "content": [part]}
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


class BindingV0_3(Binding):
    """Raw 0.3 calls on one binding: JSON-RPC 0.3 methods, or the 0.3 HTTP+JSON paths under `/v1`."""

    version_headers = _V0_3_HEADERS
    rest_root = _V0_3_REST

    def method(self, operation: str) -> str:
        return _V0_3_METHODS[operation]

    def route(self, operation: str, params: JSON) -> tuple[str, str, JSON | None]:
        return _V0_3_PATHS[operation](params)

    async def send(
        self, text: str, *, task_id: str = "", context_id: str = "", file: bool = False
    ) -> httpx.Response:
        message = message_v0_3(self.name, text, task_id=task_id, context_id=context_id, file=file)
        params: JSON = {"message": message}
        if self.name == "rest":
            # Without it a 0.3 HTTP+JSON send is non-blocking (the proto's `blocking` reads false), and an
            # error of the agent's would reach the task, not the answer.
            params["configuration"] = {"blocking": True}
        return await self.call("send", params)

    async def task_id(self, text: str) -> str:
        body = (await self.send(text)).json()
        task_id: str = body["result"]["id"] if self.name == "jsonrpc" else body["task"]["id"]
        return task_id


_V0_3_METHODS = {
    "send": "message/send",
    "get": "tasks/get",
    "cancel": "tasks/cancel",
    "push": "tasks/pushNotificationConfig/set",
    "card": "agent/getAuthenticatedExtendedCard",
}
_V0_3_PATHS: dict[str, Callable[[JSON], tuple[str, str, JSON | None]]] = {
    "send": lambda p: ("POST", "/message:send", p),
    "get": lambda p: ("GET", f"/tasks/{p['id']}", None),
    "cancel": lambda p: ("POST", f"/tasks/{p['id']}:cancel", None),
    "push": lambda p: (
        "POST",
        f"/tasks/{p['taskId']}/pushNotificationConfigs",
        {"parent": f"tasks/{p['taskId']}", "config": p},
    ),
    "card": lambda p: ("GET", "/card", None),
}


async def _v0_3_not_cancelable(binding: BindingV0_3) -> httpx.Response:
    task_id = await binding.task_id("quote")
    await binding.call("cancel", {"id": task_id})
    return await binding.call("cancel", {"id": task_id})


async def _v0_3_push(binding: BindingV0_3) -> httpx.Response:
    task_id = await binding.task_id("hello")
    config = {"taskId": task_id, "pushNotificationConfig": {"url": "https://h.example/a"}}
    return await binding.call("push", config)


async def _v0_3_to_terminal(binding: BindingV0_3) -> httpx.Response:
    return await binding.send("again", task_id=await binding.task_id("hello"))


TriggerV0_3 = Callable[[BindingV0_3], Awaitable[httpx.Response]]
TRIGGERS_V0_3: dict[str, TriggerV0_3] = {
    "TaskNotFound": lambda b: b.call("get", {"id": str(uuid.uuid4())}),
    "TaskNotCancelable": _v0_3_not_cancelable,
    "PushNotificationNotSupported": _v0_3_push,
    "UnsupportedOperation": _v0_3_to_terminal,
    "ContentTypeNotSupported": lambda b: b.send("look", file=True),
    "InvalidAgentResponse": lambda b: b.send("bad-response"),
    "ExtendedAgentCardNotConfigured": lambda b: b.call("card", {}),
    "ExtensionSupportRequired": lambda b: b.send("members-only"),
    "VersionNotSupported": lambda b: b.call("get", {"id": str(uuid.uuid4())}, {"A2A-Version": "1.7"}),
    "InvalidParams": lambda b: b.send("hello", context_id="x" * 37),
    "Internal": lambda b: b.send("explode"),
}


@pytest.mark.parametrize("binding_name", ["jsonrpc", "rest"])
@pytest.mark.parametrize("error", ERRORS)
async def test_every_a2a_error_on_every_0_3_binding(
    shared_merchant: str, binding_name: str, error: str
) -> None:
    row = TABLE[error]
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await TRIGGERS_V0_3[error](BindingV0_3(binding_name, http))

    assert response.headers["content-type"] == "application/json"
    negotiated = error != "VersionNotSupported"
    assert ("a2a-version" in response.headers) == negotiated
    if binding_name == "jsonrpc":
        assert response.status_code == 200
        body = response.json()
        assert (body["jsonrpc"], body["id"]) == ("2.0", "e-1")
        assert body["error"]["code"] == row.rpc_code
        assert body["error"]["message"]
        if negotiated:
            # The 0.3 error object: no ErrorInfo, no `"data": null`.
            assert set(body["error"]) == {"code", "message"}
        else:
            # No version was served: the refusal is the 1.0 error object, naming its reason.
            assert error_info(body["error"]["data"])["reason"] == row.reason
    else:
        assert response.status_code == row.http_status
        status = response.json()["error"]
        assert (status["code"], status["status"]) == (row.http_status, row.grpc_status)
        assert status["message"]
        assert error_info(status["details"])["reason"] == row.reason
        if negotiated:
            # What the a2a-sdk 0.3 compat client reads to raise the error by its type.
            assert response.json()["type"] == f"{error}Error"
            assert response.json()["message"] == status["message"]
    if error == "Internal":
        message = body["error"]["message"] if binding_name == "jsonrpc" else status["message"]
        assert message == "Internal error"


@pytest.mark.parametrize(
    ("text", "code", "message"),
    [
        ("members-only", -32008, "activate https://example.org/ext/members/v1"),
        pytest.param("explode", -32603, "Internal error", marks=BUGS),
    ],
)
async def test_0_3_stream_errors_are_0_3_error_objects(
    shared_merchant: str, text: str, code: int, message: str
) -> None:
    params = {"message": message_v0_3("jsonrpc", text)}
    envelope = {"jsonrpc": "2.0", "id": "s-1", "method": "message/stream", "params": params}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(JSONRPC_PATH, json=envelope)

    assert response.headers["a2a-version"] == "0.3"
    [data] = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    assert httpx.Response(200, content=data).json() == {
        "jsonrpc": "2.0",
        "id": "s-1",
        "error": {"code": code, "message": message},
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [("members-only", "ExtensionSupportRequired"), pytest.param("explode", "Internal", marks=BUGS)],
)
async def test_0_3_rest_stream_refused_at_its_first_step_is_an_error_response(
    shared_merchant: str, text: str, error: str
) -> None:
    row = TABLE[error]
    body = {"message": message_v0_3("rest", text)}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(f"{_V0_3_REST}/message:stream", json=body)

    # Not a 200 stream that drops: the error, as on any 0.3 HTTP+JSON route.
    assert response.status_code == row.http_status
    assert response.headers["content-type"] == "application/json"
    assert response.headers["a2a-version"] == "0.3"
    answer = response.json()
    assert error_info(answer["error"]["details"])["reason"] == row.reason
    assert answer["type"] == f"{error}Error"
