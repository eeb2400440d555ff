"""Bounded requests on every binding and version, against a real edge: bodies over the limit (declared or
chunked), too many parts, metadata too large or too deep, a body sent too slowly, gRPC messages over the
limit. Each is refused in its binding's form, changes nothing (no task stored), and `/healthz` keeps
answering while such requests are in flight; a request at each limit is served."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2

from a2a_x402.merchant.edge import HEALTH_PATH, JSONRPC_PATH, REST_PATH, RequestLimits
from a2a_x402.merchant.edge._limits import json_shape_problem
from tests.fixtures.a2a_grpc import a2a_stub, grpc_failure
from tests.fixtures.deadlines import MIN_SLACK_S, within_deadline
from tests.fixtures.servers import free_port

from .conftest import a2a_http, running_merchant
from .test_tenancy import stored_rows

LIMITS = RequestLimits(
    max_body_bytes=64 * 1024,
    max_parts=8,
    max_metadata_bytes=2048,
    max_metadata_depth=4,
    body_timeout_s=0.5,
)
PATIENT_LIMITS = replace(LIMITS, body_timeout_s=60.0)
"""`LIMITS` with a body deadline far beyond any answer the edge gives meanwhile, however busy the machine."""
HEADROOM_S = MIN_SLACK_S
"""How long past a deadline an answer may take on a loaded machine: the deadlines are checked, not timed."""
JSON = dict[str, Any]


@pytest.fixture
def limited(database_url: str) -> Iterator[tuple[str, int, str]]:
    """(base URL, gRPC port, database URL) of an edge with the small `LIMITS`."""
    grpc_port = free_port()
    with running_merchant(database_url, limits=LIMITS, grpc_port=grpc_port) as base_url:
        yield base_url, grpc_port, database_url


@pytest.fixture
def limited_sqlite(sqlite_url: str) -> Iterator[tuple[str, str]]:
    """(base URL, database URL) of an edge with the small `LIMITS` on SQLite, for the larger matrices."""
    with running_merchant(sqlite_url, limits=LIMITS) as base_url:
        yield base_url, sqlite_url


@pytest.fixture
async def http(limited: tuple[str, int, str]) -> AsyncIterator[httpx.AsyncClient]:
    async with a2a_http(limited[0]) as client:
        yield client


def message(parts: int = 1, metadata: JSON | None = None) -> JSON:
    answer: JSON = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "x"} for _ in range(parts)],
    }
    if metadata is not None:
        answer["metadata"] = metadata
    return answer


def rpc(params: JSON, method: str = "SendMessage") -> JSON:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def nested(depth: int) -> JSON:
    value: JSON = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"inner": value}
    return value


async def raw_exchange(base_url: str, request: bytes, *, then: bytes = b"") -> tuple[int, bytes]:
    """Send `request` (and `then`, unless the server closed), read the answer to EOF: (status, body)."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        if then:
            writer.write(then)
            await writer.drain()
        answer = await asyncio.wait_for(reader.read(), HEADROOM_S)
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def assert_jsonrpc_refusal(response: httpx.Response, *, v0_3: bool = False) -> None:
    assert response.status_code == 413, response.text
    assert response.headers["connection"] == "close"
    error = response.json()["error"]
    assert error["code"] == -32600
    if v0_3:
        assert "data" not in error
    else:
        assert error["data"][0]["reason"] == "INVALID_REQUEST"


def assert_rest_refusal(response: httpx.Response) -> None:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == 413
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"][0]["reason"] == "INVALID_REQUEST"


@pytest.mark.parametrize(
    ("path", "headers", "form"),
    [
        (JSONRPC_PATH, "A2A-Version: 1.0\r\n", "jsonrpc"),
        (JSONRPC_PATH, "", "jsonrpc-0.3"),
        (f"{REST_PATH}/message:send", "A2A-Version: 1.0\r\n", "rest"),
        (f"{REST_PATH}/v1/message:send", "", "rest-0.3"),
        ("/tenants/acme/webhooks", "", "other"),
    ],
)
async def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(
    limited: tuple[str, int, str], path: str, headers: str, form: str
) -> None:
    base_url, _, database_url = limited
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Type: application/json\r\n"
        f"Content-Length: {100 * 1024 * 1024}\r\n\r\n"
    )
    status, body = await raw_exchange(base_url, head.encode())  # not a byte of the 100 MiB is sent
    assert status == 413
    answer = httpx.Response(413, content=body).json()
    if form == "jsonrpc":
        assert answer["error"]["code"] == -32600
        assert answer["error"]["data"][0]["reason"] == "INVALID_REQUEST"
        assert answer["id"] is None
    elif form == "jsonrpc-0.3":
        assert answer["error"] == {"code": -32600, "message": answer["error"]["message"]}
    elif form == "rest":
        assert answer["error"]["status"] == "INVALID_ARGUMENT"
    elif form == "rest-0.3":
        assert answer["type"] == "InvalidRequestError"
    else:
        assert "over the limit" in answer["detail"]
    assert await stored_rows(database_url) == []


async def test_a_chunked_body_is_refused_once_past_the_limit(limited: tuple[str, int, str]) -> None:
    base_url, _, database_url = limited
    head = (
        f"POST {JSONRPC_PATH} HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 4096
    # Past the limit, and no last chunk: the server answers without waiting for the rest.
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMITS.max_body_bytes // 4096 + 2))
    status, body = await raw_exchange(base_url, head.encode(), then=chunks)
    assert status == 413
    assert "over the limit" in httpx.Response(413, content=body).json()["error"]["message"]
    assert await stored_rows(database_url) == []


async def test_too_many_parts_are_refused_on_every_http_binding(
    http: httpx.AsyncClient, limited: tuple[str, int, str]
) -> None:
    over = message(parts=LIMITS.max_parts + 1)
    response = await http.post(JSONRPC_PATH, json=rpc({"message": over}))
    assert_jsonrpc_refusal(response)
    assert response.json()["id"] == 7
    assert "9 parts, over the limit of 8" in response.json()["error"]["message"]
    assert_rest_refusal(await http.post(f"{REST_PATH}/message:send", json={"message": over}))
    # A2A 0.3: the same bounds, in 0.3's forms.
    v0_3 = {"messageId": "m", "role": "user", "kind": "message", "parts": over["parts"]}
    answer = await http.post(
        JSONRPC_PATH,
        json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": v0_3}},
        headers={"A2A-Version": "0.3"},
    )
    assert_jsonrpc_refusal(answer, v0_3=True)
    answer = await http.post(
        f"{REST_PATH}/v1/message:send", json={"message": v0_3}, headers={"A2A-Version": ""}
    )
    assert answer.status_code == 413
    assert answer.json()["type"] == "InvalidRequestError"
    assert await stored_rows(limited[2]) == []


async def test_a_message_at_the_limits_is_served(
    http: httpx.AsyncClient, limited: tuple[str, int, str]
) -> None:
    metadata = {
        "note": "x" * (LIMITS.max_metadata_bytes - 100),
        "deep": nested(LIMITS.max_metadata_depth - 1),
    }
    response = await http.post(
        JSONRPC_PATH, json=rpc({"message": message(parts=LIMITS.max_parts), "metadata": metadata})
    )
    assert response.status_code == 200, response.text
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(await stored_rows(limited[2])) == 1


@pytest.mark.parametrize(
    "metadata",
    [
        {"big": "x" * LIMITS.max_metadata_bytes},
        {f"k{i}": i for i in range(LIMITS.max_metadata_bytes // 8)},
        nested(LIMITS.max_metadata_depth + 1),
    ],
    ids=["large", "many-keys", "deep"],
)
@pytest.mark.parametrize("where", ["request", "message", "part", "data-part"])
async def test_metadata_too_large_or_deep_is_refused(
    limited_sqlite: tuple[str, str], metadata: JSON, where: str
) -> None:
    params: JSON = {"message": message()}
    if where == "request":
        params["metadata"] = metadata
    elif where == "message":
        params["message"]["metadata"] = metadata
    elif where == "part":
        params["message"]["parts"][0]["metadata"] = metadata
    else:
        params["message"]["parts"].append({"data": metadata})
    async with a2a_http(limited_sqlite[0]) as http:
        assert_jsonrpc_refusal(await http.post(JSONRPC_PATH, json=rpc(params)))
        assert_rest_refusal(await http.post(f"{REST_PATH}/message:send", json=params))
    assert await stored_rows(limited_sqlite[1]) == []


async def test_a_body_sent_too_slowly_is_cut_off(limited: tuple[str, int, str]) -> None:
    base_url, _, database_url = limited
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}'
    head = (
        f"POST {JSONRPC_PATH} HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    status, answer = await raw_exchange(base_url, head + body[:10])  # the rest never comes
    assert status == 408
    assert "not received within 0.5 s" in httpx.Response(408, content=answer).json()["error"]["message"]
    assert time.monotonic() - started < within_deadline(LIMITS.body_timeout_s)
    assert await stored_rows(database_url) == []


async def test_grpc_refuses_a_message_or_metadata_over_the_limit_and_too_many_parts(
    limited: tuple[str, int, str],
) -> None:
    _, grpc_port, database_url = limited
    metadata = [("a2a-version", "1.0")]
    huge = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id="m", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="x" * LIMITS.max_body_bytes)]
        )
    )
    many = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id="m", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="x")] * (LIMITS.max_parts + 1)
        )
    )
    deep = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="x")])
    )
    deep.metadata.update(nested(LIMITS.max_metadata_depth + 1))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_stub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.SendMessage(huge, metadata=metadata, timeout=HEADROOM_S)
        assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        # Metadata (the gRPC headers) past the header limit.
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            big = [*metadata, ("x-big", "a" * (LIMITS.max_header_bytes + 1))]
            await stub.SendMessage(deep, metadata=big, timeout=HEADROOM_S)
        assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        for request in (many, deep):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.SendMessage(request, metadata=metadata, timeout=HEADROOM_S)
            failure = grpc_failure(raised.value)
            assert failure.grpc_status == "INVALID_ARGUMENT"
            assert failure.reason == "INVALID_REQUEST"
        # At the limits it is served.
        fits = a2a_pb2.SendMessageRequest(
            message=a2a_pb2.Message(
                message_id="ok", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="x")] * LIMITS.max_parts
            )
        )
        answer = await stub.SendMessage(fits, metadata=metadata, timeout=HEADROOM_S)
        assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert len(await stored_rows(database_url)) == 1


async def test_healthz_answers_while_hostile_requests_are_in_flight(database_url: str) -> None:
    # Counted, not timed: the body deadline is far off (`PATIENT_LIMITS`), so each answer comes while every
    # trickling request is still held open; a server that served them first would answer only after
    # cutting them off.
    with running_merchant(database_url, limits=PATIENT_LIMITS) as base_url:
        async with a2a_http(base_url) as http:
            await _healthz_beside_hostile_requests(base_url, http)
    assert await stored_rows(database_url) == []


async def _has_answered(reader: asyncio.StreamReader) -> bool:
    """Whether the edge has sent anything (a 408, an EOF) on a connection it should still be holding."""
    try:
        await asyncio.wait_for(reader.read(1), 0.01)
    except TimeoutError:
        return False
    return True


async def _healthz_beside_hostile_requests(base_url: str, http: httpx.AsyncClient) -> None:
    host, port = base_url.removeprefix("http://").split(":")
    head = (
        f"POST {JSONRPC_PATH} HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    slow: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(10):  # bodies that trickle, never finished
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(head + b"1\r\n{\r\n")
        slow.append((reader, writer))
    oversized = [  # bodies at the limit and past it, as fast as the loopback takes them
        asyncio.create_task(
            raw_exchange(
                base_url,
                head,
                then=b"%x\r\n%s\r\n" % (LIMITS.max_body_bytes + 1, b"[" * (LIMITS.max_body_bytes + 1)),
            )
        )
        for _ in range(10)
    ]
    try:
        for _ in range(10):
            response = await http.get(HEALTH_PATH)
            assert response.status_code == 200
            for reader, _ in slow:
                assert not await _has_answered(reader), "answered only once a trickle was cut off"
        assert [status for status, _ in await asyncio.gather(*oversized)] == [413] * 10
    finally:
        for _, writer in slow:
            writer.close()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (5, None),
        ("parts", None),
        ({"params": {"message": {"parts": [{"text": "x"}] * 8, "extensions": ["u"] * 10_000}}}, None),
        ([{"params": {"message": {"parts": [{}] * 9}}}], "request[0].params.message.parts has 9 parts"),
        ({"message": {"parts": [{"data": [nested(5)]}]}}, "request.message.parts[0].data is nested deeper"),
        ({"metadata": "a string is no object"}, None),
    ],
)
def test_the_shape_check_walks_any_json(body: Any, problem: str | None) -> None:
    found = json_shape_problem(body, LIMITS)
    assert found == problem if problem is None else (found or "").startswith(problem)
