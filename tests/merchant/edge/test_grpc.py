"""The gRPC binding of the edge, call by call with raw stubs: versions, echo, errors, tenants, lifecycle.

One merchant edge per module (SQLite, the scripted executor, the `MembersOnly` layer and its extension
declared) serves HTTP and gRPC. Each refusal is checked for its status code, its `google.rpc.Status` with
ErrorInfo in `grpc-status-details-bin`, and that it changed nothing (no task stored).
"""

from __future__ import annotations

import dataclasses
import math
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import grpc
import grpc.aio
import pytest
from a2a.types import a2a_pb2
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.grpc_status import status_from_call
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.struct_pb2 import Value
from google.rpc import error_details_pb2

from a2a_x402.merchant.edge import CardSettingsError, GrpcListenError, create_app
from a2a_x402.merchant.edge._grpc import negotiate_grpc_version
from a2a_x402.storage import create_engine, upgrade_schema
from tests.fixtures.a2a_grpc import a2a_stub
from tests.fixtures.servers import free_port

from .conftest import TENANT_A, a2a_http, make_card, make_tenants, running_merchant
from .executors import ScriptedExecutor
from .layers import MEMBERS_EXTENSION, MembersOnly

Metadata = Sequence[tuple[str, str]]
V1: Metadata = (("a2a-version", "1.0"),)
SERVICE = "/lf.a2a.v1.A2AService/"


@dataclass
class Edge:
    """The module's merchant edge: its HTTP base URL and its gRPC target."""

    base_url: str
    target: str


@pytest.fixture(scope="module")
async def edge(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Edge]:
    """One edge serving HTTP and gRPC, with the `MembersOnly` layer and its extension declared."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('grpc') / 'x402.db'}"
    await upgrade_schema(url)
    members = a2a_pb2.AgentExtension(uri=MEMBERS_EXTENSION, description="members only", required=False)
    port = free_port()
    with running_merchant(url, handler_layers=[MembersOnly], extensions=[members], grpc_port=port) as base:
        yield Edge(base, f"127.0.0.1:{port}")


@dataclass
class Answer:
    """A unary call's outcome: its answer or its error, and the initial metadata it carried."""

    message: ProtoMessage | None
    error: grpc.aio.AioRpcError | None
    initial: dict[str, list[str]]

    def refused(self, code: grpc.StatusCode, reason: str) -> error_details_pb2.ErrorInfo:
        """The call was refused with `code` and an ErrorInfo of `reason`; returns the ErrorInfo."""
        assert self.error is not None, self.message
        assert self.error.code() == code, (self.error.code(), self.error.details())
        status = status_from_call(self.error)  # checks the Status agrees with the call's code and message
        assert status is not None, "no google.rpc.Status in grpc-status-details-bin"
        info = error_details_pb2.ErrorInfo()
        assert status.details and status.details[0].Unpack(info)
        assert (info.reason, info.domain) == (reason, "a2a-protocol.org")
        return info


def _initial(metadata: object) -> dict[str, list[str]]:
    answer: dict[str, list[str]] = {}
    for key, value in metadata or ():  # type: ignore[attr-defined]
        answer.setdefault(key, []).append(value)
    return answer


async def call(edge: Edge, method: str, request: ProtoMessage, metadata: Metadata = V1) -> Answer:
    """One unary call with exactly `metadata`."""
    async with grpc.aio.insecure_channel(edge.target) as channel:
        stub = a2a_stub(channel)
        rpc = getattr(stub, method)(request, metadata=metadata, timeout=10)
        try:
            message = await rpc
        except grpc.aio.AioRpcError as exc:
            return Answer(None, exc, _initial(exc.initial_metadata()))
        return Answer(message, None, _initial(await rpc.initial_metadata()))


async def stream(edge: Edge, method: str, request: ProtoMessage, metadata: Metadata = V1) -> Answer:
    """One streaming call read to its end; `message` is the last answer, the others are dropped."""
    async with grpc.aio.insecure_channel(edge.target) as channel:
        rpc = getattr(a2a_stub(channel), method)(request, metadata=metadata, timeout=10)
        last = None
        try:
            async for answer in rpc:
                last = answer
        except grpc.aio.AioRpcError as exc:
            return Answer(None, exc, _initial(exc.initial_metadata()))
        return Answer(last, None, _initial(await rpc.initial_metadata()))


def send(text: str, *, tenant: str = "", task_id: str = "") -> SendMessageRequest:
    """SendMessage with a user message of one text part."""
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(tenant=tenant, message=message)


async def task_count(edge: Edge, tenant: str = "") -> int:
    """How many tasks `tenant` has (through gRPC, which must work for the count to mean anything)."""
    listed = await call(edge, "ListTasks", ListTasksRequest(tenant=tenant, page_size=100))
    assert isinstance(listed.message, a2a_pb2.ListTasksResponse), listed.error
    return len(listed.message.tasks)


# -- served -------------------------------------------------------------------------------------------


async def test_a_message_is_served_and_the_version_echoed(edge: Edge) -> None:
    sent = await call(edge, "SendMessage", send("hello"))

    assert isinstance(sent.message, a2a_pb2.SendMessageResponse), sent.error
    task = sent.message.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text
    assert sent.initial["a2a-version"] == ["1.0"]
    assert "a2a-extensions" not in sent.initial  # none asked for
    fetched = await call(edge, "GetTask", GetTaskRequest(id=task.id))
    assert fetched.message == task


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param((("a2a-version", "1.0"), ("a2a-version", "1.0")), id="repeated-same"),
        pytest.param((("a2a-version", "1.0.2"),), id="patch-ignored"),
        pytest.param((("a2a-version", " 1.0 "),), id="spaces"),
    ],
)
async def test_version_forms_that_name_1_0(edge: Edge, metadata: Metadata) -> None:
    sent = await call(edge, "SendMessage", send("hello"), metadata)
    assert sent.error is None, sent.error
    assert sent.initial["a2a-version"] == ["1.0"]


async def test_only_declared_extensions_are_activated_and_echoed(edge: Edge) -> None:
    metadata = (*V1, ("a2a-extensions", f"https://example.org/ext/other/v1, {MEMBERS_EXTENSION}"))

    sent = await call(edge, "SendMessage", send("members-only"), metadata)

    assert sent.error is None, sent.error
    assert sent.initial["a2a-extensions"] == [MEMBERS_EXTENSION]


async def test_streams_and_subscriptions(edge: Edge) -> None:
    async with grpc.aio.insecure_channel(edge.target) as channel:
        stub = a2a_stub(channel)
        events = [event async for event in stub.SendStreamingMessage(send("stream"), metadata=V1)]
        asked = await stub.SendMessage(send("quote"), metadata=V1)
        subscription = stub.SubscribeToTask(SubscribeToTaskRequest(id=asked.task.id), metadata=V1)
        first = await subscription.read()
        subscription.cancel()

    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task" and "artifact_update" in kinds
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert first.task.id == asked.task.id  # the current task comes first
    assert first.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


# -- refused ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param((), id="missing"),
        pytest.param((("a2a-version", ""),), id="empty"),
        pytest.param((("a2a-version", "0.3"),), id="0.3"),
        pytest.param((("a2a-version", "1.7"),), id="1.7"),
        pytest.param((("a2a-version", "2.0"),), id="2.0"),
        pytest.param((("a2a-version", "abc"),), id="malformed"),
        pytest.param((("a2a-version", "1.0, 0.3"),), id="listed"),
        pytest.param((("a2a-version", "1.0"), ("a2a-version", "0.3")), id="repeated-different"),
    ],
)
@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_a_version_other_than_1_0_is_refused(edge: Edge, metadata: Metadata, method: str) -> None:
    before = await task_count(edge)
    ask = call if method == "SendMessage" else stream

    refused = await ask(edge, method, send("hello"), metadata)

    info = refused.refused(grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert info.metadata["supported"] == "1.0"
    assert "a2a-version" not in refused.initial  # no version was served
    assert await task_count(edge) == before


async def test_a_missing_version_says_what_to_send(edge: Edge) -> None:
    refused = await call(edge, "GetTask", GetTaskRequest(id="x"), ())

    info = refused.refused(grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert refused.error is not None and "a2a-version: 1.0" in (refused.error.details() or "")
    assert info.metadata["requested"] == "0.3"


async def test_a_required_extension_not_activated_is_refused(edge: Edge) -> None:
    before = await task_count(edge)

    refused = await call(edge, "SendMessage", send("members-only"))

    refused.refused(grpc.StatusCode.FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED")
    assert refused.initial["a2a-version"] == ["1.0"]  # served in 1.0, then refused
    assert await task_count(edge) == before


async def test_an_unknown_tenant_is_refused(edge: Edge) -> None:
    sent = await call(edge, "SendMessage", send("hello", tenant="nobody"))
    fetched = await call(edge, "GetTask", GetTaskRequest(tenant="nobody", id=str(uuid.uuid4())))
    listed = await call(edge, "ListTasks", ListTasksRequest(tenant="nobody"))

    sent.refused(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    fetched.refused(grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
    listed.refused(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")


async def test_a_task_is_invisible_to_another_tenant(edge: Edge) -> None:
    sent = await call(edge, "SendMessage", send("quote", tenant=TENANT_A))
    assert isinstance(sent.message, a2a_pb2.SendMessageResponse), sent.error
    task_id = sent.message.task.id

    fetched = await call(edge, "GetTask", GetTaskRequest(id=task_id))
    continued = await call(edge, "SendMessage", send("large", task_id=task_id))

    fetched.refused(grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
    continued.refused(grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
    own = await call(edge, "GetTask", GetTaskRequest(tenant=TENANT_A, id=task_id))
    assert isinstance(own.message, a2a_pb2.Task)
    assert own.message.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # unchanged


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        ("GetTask", GetTaskRequest(id=str(uuid.uuid4()))),
        ("CancelTask", a2a_pb2.CancelTaskRequest(id=str(uuid.uuid4()))),
        ("SendMessage", send("hello", task_id=str(uuid.uuid4()))),
        ("SendMessage", send("hello", task_id="t" * 37)),  # longer than any stored id: unknown as well
    ],
    ids=["GetTask", "CancelTask", "SendMessage", "SendMessage-oversized-id"],
)
async def test_an_unknown_task_is_not_found(edge: Edge, method: str, request_: ProtoMessage) -> None:
    refused = await call(edge, method, request_)
    refused.refused(grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")


async def test_subscribing_to_an_unknown_task_is_not_found(edge: Edge) -> None:
    refused = await stream(edge, "SubscribeToTask", SubscribeToTaskRequest(id=str(uuid.uuid4())))
    refused.refused(grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")


def _message(**fields: object) -> SendMessageRequest:
    values: dict[str, object] = {
        "message_id": str(uuid.uuid4()),
        "role": Role.ROLE_USER,
        "parts": [Part(text="x")],
    }
    values.update(fields)
    return SendMessageRequest(message=Message(**values))  # type: ignore[arg-type]


def _with_number(number: float, where: str) -> SendMessageRequest:
    request = _message()
    if where == "metadata":
        request.message.metadata.update({"deep": {"list": [1, number]}})
    else:
        request.message.parts.append(Part(data=Value(number_value=number)))
    return request


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(_with_number(math.nan, "metadata"), id="nan-in-metadata"),
        pytest.param(_with_number(math.inf, "data"), id="infinity-in-a-data-part"),
        pytest.param(_message(parts=[]), id="no-parts"),
        pytest.param(_message(role=Role.ROLE_UNSPECIFIED), id="no-role"),
        pytest.param(_message(role=Role.ROLE_AGENT), id="agent-role"),
        pytest.param(_message(parts=[Part()]), id="empty-part"),
        pytest.param(_message(context_id="c" * 37), id="oversized-context-id"),
    ],
)
async def test_a_malformed_message_is_invalid_argument(edge: Edge, request_: SendMessageRequest) -> None:
    before = await task_count(edge)

    refused = await call(edge, "SendMessage", request_)

    refused.refused(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")
    assert await task_count(edge) == before


@pytest.mark.parametrize(
    "raw",
    [pytest.param(b"\xff\xff\xff", id="corrupt"), pytest.param(b"\x12\x03\xff\xfe\xfd", id="bad-utf8")],
)
@pytest.mark.parametrize("method", ["GetTask", "SendMessage", "SendStreamingMessage"])
async def test_undecodable_bytes_are_invalid_argument(edge: Edge, raw: bytes, method: str) -> None:
    async with grpc.aio.insecure_channel(edge.target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            if method == "SendStreamingMessage":
                stream = channel.unary_stream(
                    SERVICE + method, request_serializer=bytes, response_deserializer=bytes
                )
                [_ async for _ in stream(raw, metadata=V1, timeout=10)]
            else:
                unary = channel.unary_unary(
                    SERVICE + method, request_serializer=bytes, response_deserializer=bytes
                )
                await unary(raw, metadata=V1, timeout=10)

    Answer(None, failure.value, {}).refused(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
@pytest.mark.error_logs("why: the handler raises a bug of its own, which the gRPC edge logs")
async def test_an_unexpected_failure_is_internal_and_says_nothing(edge: Edge, method: str) -> None:
    ask = call if method == "SendMessage" else stream

    refused = await ask(edge, method, send("explode"))

    refused.refused(grpc.StatusCode.INTERNAL, "INTERNAL_ERROR")
    assert refused.error is not None and refused.error.details() == "Internal error"


async def test_an_unknown_method_is_unimplemented(edge: Edge) -> None:
    async with grpc.aio.insecure_channel(edge.target) as channel:
        rpc = channel.unary_unary(SERVICE + "Nope", request_serializer=bytes, response_deserializer=bytes)
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await rpc(b"", metadata=V1, timeout=10)
    assert failure.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- the card and the server's life -------------------------------------------------------------------


async def test_the_card_lists_a_grpc_interface_per_tenant(edge: Edge) -> None:
    async with a2a_http(edge.base_url) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
        legacy = (await http.get("/.well-known/agent-card.json", headers={"A2A-Version": "0.3"})).json()

    grpc_interfaces = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert {i.get("tenant", "") for i in grpc_interfaces} == {tenant.id for tenant in make_tenants()}
    assert {(i["url"], i["protocolVersion"]) for i in grpc_interfaces} == {(edge.target, "1.0")}
    assert "GRPC" not in str(legacy)  # gRPC serves 1.0 only


async def test_the_grpc_server_stops_with_the_app(sqlite_url: str) -> None:
    port = free_port()
    with running_merchant(sqlite_url, grpc_port=port) as base_url:
        served = await call(Edge(base_url, f"127.0.0.1:{port}"), "SendMessage", send("hello"))
        assert served.error is None, served.error
    after = await call(Edge(base_url, f"127.0.0.1:{port}"), "SendMessage", send("hello"))
    assert after.error is not None and after.error.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_grpc_port_in_use_fails_the_startup_naming_the_address(sqlite_url: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        listen = f"127.0.0.1:{busy.getsockname()[1]}"
        engine = create_engine(sqlite_url)
        app = create_app(
            executor=ScriptedExecutor(),
            engine=engine,
            tenants=make_tenants(),
            card=make_card("http://127.0.0.1:1"),
            grpc_listen=listen,
        )
        try:
            with pytest.raises(GrpcListenError) as refused:
                async with app.router.lifespan_context(app):
                    pass
        finally:
            await engine.dispose()

    assert str(refused.value) == f"cannot listen for gRPC at {listen} (is the port in use?)"


async def test_a_card_cannot_list_grpc_that_is_not_served(sqlite_url: str) -> None:
    listed = dataclasses.replace(make_card("http://127.0.0.1:1"), grpc_url="127.0.0.1:2")
    engine = create_engine(sqlite_url)
    try:
        with pytest.raises(CardSettingsError):
            create_app(executor=ScriptedExecutor(), engine=engine, tenants=make_tenants(), card=listed)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("url", ["http://shop.example:50051", "shop.example", "shop example:1"])
def test_a_grpc_url_is_host_and_port(url: str) -> None:
    with pytest.raises(CardSettingsError):
        dataclasses.replace(make_card("http://127.0.0.1:1"), grpc_url=url)


def test_negotiation_reads_every_value() -> None:
    assert negotiate_grpc_version([("a2a-version", "1.0"), ("other", "0.3")]) == "1.0"
    with pytest.raises(Exception, match="repeated"):
        negotiate_grpc_version([("a2a-version", "1.0"), ("A2A-VERSION", "0.3")])
