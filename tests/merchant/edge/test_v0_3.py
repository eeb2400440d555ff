"""A2A 0.3 served for real: raw 0.3 JSON-RPC and HTTP+JSON, the a2a-sdk 0.3 compat client, and payloads in
the other version's form refused on both sides."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.base_client import BaseClient
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.compat.v0_3.rest_transport import CompatRestTransport
from a2a.helpers import new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import ExtensionSupportRequiredError, TaskNotFoundError

from a2a_x402.merchant.edge import AGENT_CARD_PATH, JSONRPC_PATH, REST_PATH
from tests.fixtures.deadlines import HANG_S

from .executors import QUESTION, STREAM_STEPS
from .layers import MEMBERS_EXTENSION
from .wire import JSON, mid, walk_keys

SDK_BINDINGS = {"jsonrpc": TransportProtocol.JSONRPC.value, "rest": TransportProtocol.HTTP_JSON.value}


def message_v0_3(text: str, *, task_id: str = "") -> JSON:
    """A 0.3 JSON-RPC user message (the 0.3 JSON schema: `kind`, lowercase role)."""
    part = {"kind": "text", "text": text}
    message: JSON = {"kind": "message", "messageId": mid(), "role": "user", "parts": [part]}
    if task_id:
        message["taskId"] = task_id
    return message


async def rpc_v0_3(http: httpx.AsyncClient, method: str, params: JSON) -> JSON:
    """One 0.3 JSON-RPC call without `A2A-Version` (0.3 clients send none); the whole answer."""
    envelope = {"jsonrpc": "2.0", "id": "r-1", "method": method, "params": params}
    response = await http.post(JSONRPC_PATH, json=envelope)
    assert response.status_code == 200
    assert response.headers["a2a-version"] == "0.3"
    body: JSON = response.json()
    return body


async def test_raw_jsonrpc_0_3_input_required_flow(shared_merchant: str) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        first = (await rpc_v0_3(http, "message/send", {"message": message_v0_3("quote")}))["result"]
        follow_up = {"message": message_v0_3("M", task_id=first["id"])}
        done = (await rpc_v0_3(http, "message/send", follow_up))["result"]
        fetched = (await rpc_v0_3(http, "tasks/get", {"id": first["id"]}))["result"]
        missing = await rpc_v0_3(http, "tasks/get", {"id": str(uuid.uuid4())})

    assert (first["kind"], first["status"]["state"]) == ("task", "input-required")
    assert first["status"]["message"]["parts"] == [{"kind": "text", "text": QUESTION}]
    assert first["status"]["message"]["role"] == "agent"
    assert (done["kind"], done["status"]["state"]) == ("task", "completed")
    assert done["artifacts"][0]["parts"] == [{"kind": "text", "text": "order: M"}]
    assert fetched == done
    assert missing["error"]["code"] == -32001


async def test_raw_jsonrpc_0_3_stream_has_kinds_and_final(shared_merchant: str) -> None:
    params = {"message": message_v0_3("stream")}
    request = {"jsonrpc": "2.0", "id": "s-1", "method": "message/stream", "params": params}
    events: list[JSON] = []
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        async with http.stream("POST", JSONRPC_PATH, json=request) as response:
            assert response.headers["a2a-version"] == "0.3"
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    events.append(httpx.Response(200, content=line[5:].strip()).json()["result"])

    assert [event["kind"] for event in events] == [
        "task",
        *["status-update"] * STREAM_STEPS,
        "artifact-update",
        "status-update",
    ]
    assert events[-1]["final"] is True
    assert events[-1]["status"]["state"] == "completed"


BLOCKING = {"blocking": True}
"""0.3 HTTP+JSON `configuration` asking to wait: without it `message:send` is non-blocking (proto3 false)."""


async def test_raw_rest_0_3_flow(shared_merchant: str) -> None:
    ask = {"messageId": mid(), "role": "ROLE_USER", "content": [{"text": "quote"}]}
    body = {"message": ask, "configuration": BLOCKING}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        sent = await http.post(f"{REST_PATH}/v1/message:send", json=body)
        task = sent.json()["task"]
        answer = {"messageId": mid(), "role": "ROLE_USER", "taskId": task["id"], "content": [{"text": "S"}]}
        follow = {"message": answer, "configuration": BLOCKING}
        done = await http.post(f"{REST_PATH}/v1/message:send", json=follow)
        fetched = await http.get(f"{REST_PATH}/v1/tasks/{task['id']}")

    assert sent.status_code == 200
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["a2a-version"] == "0.3"
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert task["status"]["message"]["content"] == [{"text": QUESTION}]
    assert done.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert fetched.json()["artifacts"][0]["parts"] == [{"text": "order: S"}]


@pytest.mark.parametrize("configuration", [None, {}, {"blocking": False}])
async def test_rest_0_3_send_without_blocking_answers_at_once(
    shared_merchant: str, configuration: JSON | None
) -> None:
    # The 0.3 proto's `blocking` is a plain bool: absent is false, "the task will be returned immediately".
    body: JSON = {"message": {"messageId": mid(), "role": "ROLE_USER", "content": [{"text": "quote"}]}}
    if configuration is not None:
        body["configuration"] = configuration
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        sent = await http.post(f"{REST_PATH}/v1/message:send", json=body)
        task = sent.json()["task"]
        state = task["status"]["state"]
        for _ in range(100):
            fetched = await http.get(f"{REST_PATH}/v1/tasks/{task['id']}")
            if fetched.json()["status"]["state"] != state:
                break
            await asyncio.sleep(0.05)

    assert sent.status_code == 200
    assert state == "TASK_STATE_SUBMITTED"
    assert fetched.json()["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


@pytest.mark.parametrize("name", ["historyLength", "history_length"])
async def test_rest_0_3_get_task_reads_history_length_by_either_name(shared_merchant: str, name: str) -> None:
    # The proto's HTTP rule names query parameters by field path (history_length); JSON names work too.
    ask = {"messageId": mid(), "role": "ROLE_USER", "content": [{"text": "quote"}]}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        sent = await http.post(
            f"{REST_PATH}/v1/message:send", json={"message": ask, "configuration": BLOCKING}
        )
        task_id = sent.json()["task"]["id"]
        answer = {"messageId": mid(), "role": "ROLE_USER", "taskId": task_id, "content": [{"text": "S"}]}
        await http.post(f"{REST_PATH}/v1/message:send", json={"message": answer, "configuration": BLOCKING})
        full = await http.get(f"{REST_PATH}/v1/tasks/{task_id}")
        limited = await http.get(f"{REST_PATH}/v1/tasks/{task_id}", params={name: 1})

    assert len(full.json()["history"]) > 1
    assert len(limited.json()["history"]) == 1


@pytest.mark.parametrize(
    ("version", "path", "body", "marker"),
    [
        ("1.0", REST_PATH + "/message:send", {"message": message_v0_3("hello")}, '"kind"'),
        (
            "1.0",
            JSONRPC_PATH,
            {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message_v0_3("hi")}},
            '"kind"',
        ),
        (
            "1.0",
            JSONRPC_PATH,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": {"messageId": "m", "role": "user", "parts": [{"text": "hi"}]}},
            },
            'role "user"',
        ),
        (
            "1.0",
            REST_PATH + "/message:send",
            {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hello"}]}},
            '"content"',
        ),
        (
            "0.3",
            REST_PATH + "/v1/message:send",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hello"}]}},
            '"parts"',
        ),
        (
            "0.3",
            JSONRPC_PATH,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {"message": message_v0_3("hello"), "configuration": {"returnImmediately": True}},
            },
            '"returnImmediately"',
        ),
    ],
)
async def test_a_message_in_the_other_versions_form_is_refused(
    shared_merchant: str, version: str, path: str, body: JSON, marker: str
) -> None:
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(path, json=body, headers={"A2A-Version": version})

    answer = response.json()
    if path == JSONRPC_PATH:
        assert answer["error"]["code"] == -32602
        message = answer["error"]["message"]
    else:
        assert response.status_code == 400
        assert answer["error"]["details"][0]["reason"] == "INVALID_PARAMS"
        message = answer["error"]["message"]
    assert marker in message
    assert response.headers["a2a-version"] == version


@pytest.mark.parametrize("role", [{}, [], 7, None])
async def test_a_1_0_message_whose_role_is_not_a_string_is_invalid_params(
    shared_merchant: str, role: JSON
) -> None:
    # Found by schemathesis: an object as the role made the 0.3-marker check raise (HTTP 500).
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": role, "parts": [{"text": "hi"}]}},
    }
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(JSONRPC_PATH, json=body, headers={"A2A-Version": "1.0"})

    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("message/send", {"message": {"kind": "message", "role": "user"}}, "params.message"),
        ("message/send", {}, "params.message"),
        ("message/stream", {"message": "hello"}, "params.message"),
        ("tasks/get", {"historyLength": 1}, "params.id"),
        ("tasks/cancel", {"id": 7}, "params.id"),
    ],
)
async def test_invalid_0_3_params_are_invalid_params_not_invalid_request(
    shared_merchant: str, method: str, params: JSON, field: str
) -> None:
    # The SDK's 0.3 layer answers every schema failure -32600; JSON-RPC 2.0 gives bad params -32602.
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        answer = await rpc_v0_3(http, method, params)

    assert answer["id"] == "r-1"
    assert answer["error"]["code"] == -32602
    assert field in answer["error"]["message"]


async def test_invalid_0_3_params_of_a_request_without_id_are_invalid_params(shared_merchant: str) -> None:
    envelope = {"jsonrpc": "2.0", "method": "message/send", "params": {"": "not a message"}}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(JSONRPC_PATH, json=envelope)

    assert response.json()["error"]["code"] == -32602


async def test_a_broken_0_3_envelope_stays_invalid_request(shared_merchant: str) -> None:
    envelope = {"jsonrpc": "1.0", "id": "r-1", "method": "tasks/get", "params": {}}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(JSONRPC_PATH, json=envelope)

    assert response.json()["error"]["code"] == -32600


@pytest.mark.parametrize("path", ["/v1/message:send", "/v1/message:stream"])
async def test_a_file_by_bytes_on_0_3_rest_is_refused_clearly(shared_merchant: str, path: str) -> None:
    # The SDK's 0.3 HTTP+JSON layer would mis-decode the bytes (a 500, or a corrupted file).
    text = "aGVsbG8="  # "hello": bytes that are valid UTF-8 are mis-read too
    content = [{"file": {"fileWithBytes": text, "mimeType": "text/plain"}}]
    body = {"message": {"messageId": mid(), "role": "ROLE_USER", "content": content}}
    async with httpx.AsyncClient(base_url=shared_merchant, timeout=HANG_S) as http:
        response = await http.post(REST_PATH + path, json=body)

    assert response.status_code == 400
    answer = response.json()
    assert answer["error"]["details"][0]["reason"] == "INVALID_PARAMS"
    assert "fileWithUri" in answer["error"]["message"]
    assert response.headers["a2a-version"] == "0.3"


# -- the a2a-sdk 0.3 compat client --------------------------------------------------------------------


@dataclass
class CompatClients:
    """a2a-sdk clients built from what a 0.3 client reads of the card a header-less fetch returns (its `url`,
    `preferredTransport` and `additionalInterfaces`, not the 1.0 `supportedInterfaces` beside them): the
    SDK's 0.3 transports."""

    binding: str
    unary: Client
    streaming: Client


@pytest.fixture(params=sorted(SDK_BINDINGS))
async def compat(shared_merchant: str, request: pytest.FixtureRequest) -> AsyncIterator[CompatClients]:
    """Unary and streaming 0.3 compat clients on one binding."""
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        document = (await http.get(shared_merchant + AGENT_CARD_PATH)).json()
        # A 0.3 client knows no `supportedInterfaces`; the SDK's parser then reads the 0.3 members.
        del document["supportedInterfaces"]
        card = parse_agent_card(document)
        clients = [
            ClientFactory(
                ClientConfig(
                    httpx_client=http,
                    supported_protocol_bindings=[SDK_BINDINGS[request.param]],
                    streaming=streaming,
                )
            ).create(card)
            for streaming in (False, True)
        ]
        yield CompatClients(request.param, *clients)
        for client in clients:
            await client.close()


def request(text: str, *, task_id: str | None = None) -> SendMessageRequest:
    """SendMessage of one user text."""
    return SendMessageRequest(message=new_text_message(text, task_id=task_id, role=Role.ROLE_USER))


async def collect(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    """Every event of a client call."""
    return [event async for event in events]


async def test_compat_client_speaks_0_3(compat: CompatClients) -> None:
    client = compat.unary
    assert isinstance(client, BaseClient)
    transport = client._transport  # noqa: SLF001 - which transport the factory chose is the point
    assert isinstance(transport, CompatJsonRpcTransport | CompatRestTransport)

    [first] = await collect(client.send_message(request("quote")))
    [second] = await collect(client.send_message(request("M", task_id=first.task.id)))

    assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert first.task.status.message.parts[0].text == QUESTION
    assert second.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert second.task.artifacts[0].parts[0].text == "order: M"
    fetched = await client.get_task(GetTaskRequest(id=first.task.id))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    # On HTTP+JSON the SDK's client reads the error `type` (without it, a 404 would be MethodNotFound).
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))


@pytest.mark.parametrize("binding_name", sorted(SDK_BINDINGS))
async def test_a_1_0_client_that_fetched_the_card_without_a_version_speaks_1_0(
    shared_merchant: str, binding_name: str
) -> None:
    # The card for requests naming no version lists the 1.0 interfaces first; a client of both picks 1.0.
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card = await A2ACardResolver(http, shared_merchant).get_agent_card()
        config = ClientConfig(
            httpx_client=http, supported_protocol_bindings=[SDK_BINDINGS[binding_name]], streaming=False
        )
        client = ClientFactory(config).create(card)
        try:
            # Which transport the factory chose is the point; the SDK types only its base `Client`.
            transport = client._transport  # type: ignore[attr-defined]  # noqa: SLF001
            [first] = await collect(client.send_message(request("quote")))
            fetched = await client.get_task(GetTaskRequest(id=first.task.id))
        finally:
            await client.close()

    assert not isinstance(transport, CompatJsonRpcTransport | CompatRestTransport)
    assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert fetched.id == first.task.id


async def test_compat_client_learns_an_extension_is_required(compat: CompatClients) -> None:
    # ExtensionSupportRequired is an A2A 1.0 error: a server-defined code (-32008) on 0.3 JSON-RPC, its
    # `type` on 0.3 HTTP+JSON; the a2a-sdk 0.3 compat client raises the error itself on both.
    with pytest.raises(ExtensionSupportRequiredError, match=re.escape(MEMBERS_EXTENSION)):
        await collect(compat.unary.send_message(request("members-only")))
    with pytest.raises(ExtensionSupportRequiredError, match=re.escape(MEMBERS_EXTENSION)):
        await collect(compat.streaming.send_message(request("members-only")))


async def test_compat_client_streams(compat: CompatClients) -> None:
    events = await collect(compat.streaming.send_message(request("stream")))

    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["task", *["status_update"] * STREAM_STEPS, "artifact_update", "status_update"]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_compat_client_subscribes_and_cancels(shared_merchant: str, compat: CompatClients) -> None:
    [first] = await collect(compat.unary.send_message(request("quote")))

    events = compat.streaming.subscribe(SubscribeToTaskRequest(id=first.task.id))
    initial = await anext(events)
    canceled = await compat.unary.cancel_task(CancelTaskRequest(id=first.task.id))
    later = await collect(events)

    assert initial.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert later[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    # Seen by a 1.0 client, the same task is plain 1.0 ProtoJSON.
    async with httpx.AsyncClient(
        timeout=HANG_S, base_url=shared_merchant, headers={"A2A-Version": "1.0"}
    ) as http:
        current = (await http.get(f"{REST_PATH}/tasks/{first.task.id}")).json()
    assert current["status"]["state"] == "TASK_STATE_CANCELED"
    assert "kind" not in set(walk_keys(current))
