"""`cli.bounded_http_protocol`, over raw sockets against real uvicorn: headers that never finish (on a fresh
connection, mid-request, on a kept-alive connection's next request) are answered 408 and the connection
closed; too many or too large headers 431; whole requests are served as before, and a server holding 60
half-sent requests keeps answering others."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from a2a_x402.cli import HeaderLimits, bounded_http_protocol
from tests.fixtures.deadlines import HANG_S, within_deadline
from tests.fixtures.servers import serve_asgi

LIMITS = HeaderLimits(header_timeout_s=0.5, max_header_count=20, max_header_bytes=4096)
PATIENT_LIMITS = HeaderLimits(header_timeout_s=HANG_S, max_header_count=20, max_header_bytes=4096)
"""Limits whose header deadline is far beyond any answer the server gives meanwhile, however busy (5 s was
not: on a loaded machine five answers once took longer, and the held connections got their 408s first)."""


async def _echo(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"{request.method} {len(await request.body())}")


@pytest.fixture
def address() -> Iterator[tuple[str, int]]:
    app = Starlette(routes=[Route("/", _echo, methods=["GET", "POST"])])
    with serve_asgi(app, http=bounded_http_protocol(LIMITS)) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        yield host, int(port)


async def _answer(address: tuple[str, int], *sent: bytes, limits: HeaderLimits = LIMITS) -> bytes:
    """Everything the server sends, to EOF, after `sent` (each part written on its own), to a server with
    `limits`."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        for part in sent:
            writer.write(part)
            await writer.drain()
        # Only a server that ignored its deadline reaches this bound, however busy the machine.
        return await asyncio.wait_for(reader.read(), within_deadline(limits.header_timeout_s))
    finally:
        writer.close()


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET / HTTP/1.1\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "],
    ids=["nothing", "request-line", "half-a-header"],
)
async def test_headers_not_finished_in_time_are_cut_off(address: tuple[str, int], sent: bytes) -> None:
    started = time.monotonic()
    answer = await _answer(address, sent)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert LIMITS.header_timeout_s <= time.monotonic() - started + 0.05


async def test_a_kept_alive_connection_s_next_request_has_its_own_deadline(address: tuple[str, int]) -> None:
    answer = await _answer(address, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n")
    first, _, rest = answer.partition(b"GET 0")
    assert first.startswith(b"HTTP/1.1 200 ")
    assert rest.startswith(b"HTTP/1.1 408 ")


async def test_too_many_headers_are_refused(address: tuple[str, int]) -> None:
    headers = b"".join(b"X-%d: 1\r\n" % i for i in range(LIMITS.max_header_count + 1))
    answer = await _answer(address, b"GET / HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")


async def test_headers_too_large_are_refused_before_they_end(address: tuple[str, int]) -> None:
    # One header that never ends: refused once past the limit, not buffered until its line is complete.
    answer = await _answer(
        address, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (LIMITS.max_header_bytes + 1)
    )
    assert answer.startswith(b"HTTP/1.1 431 ")


async def test_requests_within_the_limits_are_served(address: tuple[str, int]) -> None:
    headers = {f"X-{i}": "1" for i in range(LIMITS.max_header_count - 10)}
    async with httpx.AsyncClient(timeout=HANG_S, base_url=f"http://{address[0]}:{address[1]}") as client:
        for _ in range(3):  # on one kept-alive connection
            response = await client.post("/", content=b"x" * 100_000, headers=headers)
            assert response.text == "POST 100000"


@pytest.fixture
def patient_address() -> Iterator[tuple[str, int]]:
    """A server like `address`'s whose header deadline (`PATIENT_LIMITS`) a loaded machine cannot reach."""
    app = Starlette(routes=[Route("/", _echo, methods=["GET", "POST"])])
    with serve_asgi(app, http=bounded_http_protocol(PATIENT_LIMITS)) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        yield host, int(port)


async def test_the_server_answers_while_60_connections_hold_half_their_headers(
    patient_address: tuple[str, int],
) -> None:
    # Counted, not timed: every answer comes while all 60 connections are still held (their deadline is
    # far off), so none of them stands in the way; a server that served them first would answer only
    # after cutting them off.
    address = patient_address
    half = b"GET / HTTP/1.1\r\nHost: x\r\nX-"
    held = [asyncio.create_task(_answer(address, half, limits=PATIENT_LIMITS)) for _ in range(60)]
    try:
        async with httpx.AsyncClient(timeout=HANG_S, base_url=f"http://{address[0]}:{address[1]}") as client:
            for _ in range(5):
                assert (await client.get("/")).text == "GET 0"
                ended = [task for task in held if task.done()]
                assert not ended, f"answered only once a held connection ended: {ended[0]!r}"
    finally:
        # Their 408 at the deadline is `test_headers_not_finished_in_time_are_cut_off`'s to check.
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
