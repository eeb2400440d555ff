"""The gRPC binding's bounds on slow clients and on what one connection may hold, against a real edge with a
real grpc client: a call whose request message does not arrive within the body deadline is ended
DEADLINE_EXCEEDED (on unary and streaming methods, and with half a message sent over raw HTTP/2), a
connection's concurrent calls are capped (a further call waits while other connections are served), an
idle connection is closed, a connection past its age is closed with the call it held, and a connection
that never starts HTTP/2 is closed at the header deadline; each bound is the merchant setting of its name.
Deadlines are checked with headroom (`within_deadline`), never timed."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from dataclasses import fields, replace
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.types import a2a_pb2

from a2a_x402.merchant.edge import RequestLimits
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.wiring import request_limits
from tests.fixtures.a2a_grpc import a2a_stub
from tests.fixtures.deadlines import wait_until, within_deadline
from tests.fixtures.servers import free_port

from .conftest import running_merchant

SHORT_S = 0.5
PATIENT_S = 60.0
"""A deadline far beyond any answer the edge gives meanwhile, however busy the machine."""
PATIENT = RequestLimits(body_timeout_s=PATIENT_S, header_timeout_s=PATIENT_S)
METADATA = (("a2a-version", "1.0"),)
SERVICE = "/lf.a2a.v1.A2AService"
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)
"""Channel options giving a channel a connection of its own: channels to one target share one by default."""


def _edge(sqlite_url: str, limits: RequestLimits) -> Iterator[str]:
    """`127.0.0.1:<port>` of the gRPC binding of an edge with `limits`, served until the test ends."""
    grpc_port = free_port()
    with running_merchant(sqlite_url, limits=limits, grpc_port=grpc_port):
        yield f"127.0.0.1:{grpc_port}"


@pytest.fixture
def short_deadlines(sqlite_url: str) -> Iterator[str]:
    yield from _edge(sqlite_url, replace(PATIENT, body_timeout_s=SHORT_S, header_timeout_s=SHORT_S))


@pytest.fixture
def two_streams(sqlite_url: str) -> Iterator[str]:
    yield from _edge(sqlite_url, replace(PATIENT, grpc_max_concurrent_streams=2))


@pytest.fixture
def short_lived(sqlite_url: str) -> Iterator[str]:
    limits = replace(
        PATIENT,
        grpc_max_connection_idle_s=SHORT_S,
        grpc_max_connection_age_s=SHORT_S,
        grpc_max_connection_age_grace_s=SHORT_S,
    )
    yield from _edge(sqlite_url, limits)


def _silent_call(channel: grpc.aio.Channel, method: str) -> Any:
    """A call of `method` opened without its request message (written by nobody until `done_writing`)."""
    raw: Any = lambda data: data  # noqa: E731 - bytes on the wire as they are
    # No request iterator: the reader/writer style, where the request stream is written by hand.
    opened: Any = (
        channel.stream_stream(f"{SERVICE}/{method}", raw, raw)
        if method == "SendStreamingMessage"
        else channel.stream_unary(f"{SERVICE}/{method}", raw, raw)
    )
    return opened(metadata=METADATA)


@asynccontextmanager
async def silent_calls(channel: grpc.aio.Channel, method: str, count: int = 1) -> AsyncIterator[list[Any]]:
    """`count` calls of `method` that send no request message until the block ends; then their request
    streams end (empty), and the block waits for every call to be over."""
    calls = [_silent_call(channel, method) for _ in range(count)]
    try:
        yield calls
    finally:
        for call in calls:
            if not call.done():
                with suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    await call.done_writing()
                await asyncio.wait_for(_ended(call), 30)


async def _ended(call: Any) -> grpc.aio.AioRpcError:
    """How `call` ended (it must fail)."""
    try:
        if isinstance(call, grpc.aio.StreamStreamCall):
            async for _ in call:
                pass
        else:
            await call
    except grpc.aio.AioRpcError as exc:
        return exc
    raise AssertionError("the call succeeded")


async def _answered(stub: Any) -> bool:
    """Whether the edge answers a call (an unknown task's GetTask: an error, answered all the same)."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=METADATA, timeout=30)
    return raised.value.code() is grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_a_call_whose_message_does_not_arrive_in_time_is_ended(
    short_deadlines: str, method: str
) -> None:
    async with grpc.aio.insecure_channel(short_deadlines) as channel:
        async with silent_calls(channel, method) as [call]:
            started = time.monotonic()
            ended = await asyncio.wait_for(_ended(call), within_deadline(SHORT_S))
            waited = time.monotonic() - started
        answered = await _answered(a2a_stub(channel))  # the connection itself serves on

    assert ended.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert ended.details() == f"the request message was not received within {SHORT_S:g} s"
    assert SHORT_S <= waited + 0.05  # the deadline, not something sooner, ended it
    assert answered


async def test_a_connection_carries_at_most_its_stream_cap_while_others_are_served(two_streams: str) -> None:
    async with (
        grpc.aio.insecure_channel(two_streams, options=OWN_CONNECTION) as capped,
        grpc.aio.insecure_channel(two_streams, options=OWN_CONNECTION) as other,
    ):
        assert await _answered(a2a_stub(capped))  # connected, the edge's settings (its cap) received
        async with silent_calls(capped, "SendMessage", 2) as held:
            for call in held:
                await call.wait_for_connection()  # its stream is open
            third = asyncio.create_task(_answered(a2a_stub(capped)))
            # Counted, not timed: calls on another connection are answered while the third call on the
            # capped one waits; an edge without the cap would have answered it first.
            for _ in range(3):
                assert await _answered(a2a_stub(other))
            assert not third.done(), "a third call was served on a connection capped at two"
        # The held calls are over: the third is served.
        assert await asyncio.wait_for(third, within_deadline(1.0))


async def test_an_idle_connection_is_closed(short_lived: str) -> None:
    async with grpc.aio.insecure_channel(short_lived) as channel:
        # Before the call: the server's idle time starts when it has answered, before the client hears it.
        asked_at = time.monotonic()
        assert await _answered(a2a_stub(channel))
        assert channel.get_state() is grpc.ChannelConnectivity.READY

        # The client's own idle timeout is 30 minutes: only the server's GOAWAY leaves READY this soon.
        await wait_until(
            lambda: channel.get_state() is not grpc.ChannelConnectivity.READY,
            what="the idle connection closed",
            timeout_s=within_deadline(SHORT_S),
        )
        assert SHORT_S <= time.monotonic() - asked_at + 0.05


async def test_a_connection_past_its_age_is_closed_with_the_call_it_held(short_lived: str) -> None:
    # Before the channel connects: the connection's age starts when it is made, by the call below.
    started = time.monotonic()
    async with grpc.aio.insecure_channel(short_lived) as channel:
        # Held far longer than age and grace (the body deadline is patient): only the age ends it.
        async with silent_calls(channel, "SendMessage") as [call]:
            ended = await asyncio.wait_for(_ended(call), within_deadline(2 * SHORT_S))
            waited = time.monotonic() - started

    assert ended.code() is grpc.StatusCode.UNAVAILABLE
    assert SHORT_S <= waited + 0.05


# Raw HTTP/2 (RFC 9113), the least of it: frame types, flags, and HPACK literals without indexing.
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_DATA, _HEADERS, _RST_STREAM, _SETTINGS, _PING, _GOAWAY = 0x0, 0x1, 0x3, 0x4, 0x6, 0x7
_END_STREAM, _ACK, _END_HEADERS = 0x1, 0x1, 0x4


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    # A literal header field without indexing, new name, no Huffman; every length here is below 127.
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, int, int, bytes]:
    head = await reader.readexactly(9)
    length = int.from_bytes(head[:3], "big")
    stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
    return head[3], head[4], stream, await reader.readexactly(length)


async def test_half_a_message_sent_over_raw_http2_is_cut_off_at_the_deadline(short_deadlines: str) -> None:
    host, port = short_deadlines.split(":")
    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="x" * 100)])
    ).SerializeToString()
    message = b"\x00" + struct.pack(">I", len(request)) + request
    headers = b"".join(
        _literal(name, value)
        for name, value in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", f"{SERVICE}/SendMessage"),
            (":authority", short_deadlines),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("a2a-version", "1.0"),
        )
    )
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            _PREFACE
            + _frame(_SETTINGS, 0, 0, b"")
            + _frame(_HEADERS, _END_HEADERS, 1, headers)
            + _frame(_DATA, 0, 1, message[: len(message) // 2])
        )
        await writer.drain()
        started = time.monotonic()

        async def stream_ended() -> int:
            """The type of the frame that ended stream 1: trailers (HEADERS with END_STREAM) or RST_STREAM."""
            while True:
                kind, flags, stream, payload = await _read_frame(reader)
                if kind == _SETTINGS and not flags & _ACK:
                    writer.write(_frame(_SETTINGS, _ACK, 0, b""))
                elif kind == _PING and not flags & _ACK:
                    writer.write(_frame(_PING, _ACK, 0, payload))
                elif stream == 1 and (kind == _RST_STREAM or (kind == _HEADERS and flags & _END_STREAM)):
                    return kind
                elif kind == _GOAWAY:
                    raise AssertionError("the connection was closed, not the call ended")

        ended = await asyncio.wait_for(stream_ended(), within_deadline(SHORT_S))
        waited = time.monotonic() - started
    finally:
        writer.close()

    assert ended == _HEADERS  # ended with a status (trailers), not merely reset
    assert SHORT_S <= waited + 0.05


async def test_a_connection_that_never_starts_http2_is_closed_at_the_header_deadline(
    short_deadlines: str,
) -> None:
    host, port = short_deadlines.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        started = time.monotonic()
        sent = await asyncio.wait_for(reader.read(), within_deadline(SHORT_S))  # to EOF: closed
        waited = time.monotonic() - started
    finally:
        writer.close()
    assert SHORT_S <= waited + 0.05, sent


def test_every_bound_is_the_setting_of_its_name() -> None:
    changed = {field.name: 2 * getattr(RequestLimits(), field.name) for field in fields(RequestLimits)}
    settings = MerchantSettings(**changed, asset="0x" + "11" * 20, pay_to="0x" + "22" * 20, _env_file=None)
    assert request_limits(settings) == RequestLimits(**changed)
