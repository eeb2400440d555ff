"""The header bounds of `x402-merchant serve` and `x402-facilitator serve`, as real processes on 127.0.0.1
configured only through their settings (`X402_HEADER_TIMEOUT_S`, `X402_MAX_HEADER_COUNT`,
`X402_MAX_HEADER_BYTES`; the facilitator's `X402_FACILITATOR_*` of the same names): a connection that sends
half its headers is answered 408 and closed at the deadline, too many headers and an oversized one are
refused (431), and `/healthz` keeps answering while connections hold half their headers. The deadlines
are checked with headroom (`within_deadline`), never timed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest

from a2a_x402.devchain import DevChain
from tests.faults.processes import merchant_processes
from tests.fixtures.deadlines import HANG_S, within_deadline
from tests.fixtures.facilitator_processes import facilitator_processes

HEADER_TIMEOUT_S = 0.5
PATIENT_TIMEOUT_S = HANG_S
"""A header deadline far beyond any answer the server gives meanwhile, however busy the machine."""
MAX_HEADER_COUNT = 20
MAX_HEADER_BYTES = 4096
Serve = Callable[[float], AbstractAsyncContextManager[str]]
"""`serve(header_timeout_s)`: a served process with that header deadline (and the bounds above); its URL."""


@pytest.fixture(params=["merchant", "facilitator"])
def serve(request: pytest.FixtureRequest, chain: DevChain, sqlite_url: str, tmp_path: Path) -> Serve:
    @asynccontextmanager
    async def merchant(header_timeout_s: float) -> AsyncIterator[str]:
        with merchant_processes(chain, sqlite_url, tmp_path) as processes:
            started = await processes.start(
                header_timeout_s=header_timeout_s,
                max_header_count=MAX_HEADER_COUNT,
                max_header_bytes=MAX_HEADER_BYTES,
            )
            yield started.base_url

    @asynccontextmanager
    async def facilitator(header_timeout_s: float) -> AsyncIterator[str]:
        async with facilitator_processes(chain, tmp_path) as processes:
            started = await processes.serve(
                sqlite_url,
                X402_FACILITATOR_HEADER_TIMEOUT_S=str(header_timeout_s),
                X402_FACILITATOR_MAX_HEADER_COUNT=str(MAX_HEADER_COUNT),
                X402_FACILITATOR_MAX_HEADER_BYTES=str(MAX_HEADER_BYTES),
            )
            yield started.url

    return merchant if request.param == "merchant" else facilitator


def _address(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").split(":")
    return host, int(port)


async def _answer(address: tuple[str, int], sent: bytes, header_timeout_s: float) -> tuple[bytes, float]:
    """Everything the server sends after `sent`, to EOF (the server closed), and how long that took."""
    reader, writer = await asyncio.open_connection(*address)
    started = time.monotonic()
    try:
        writer.write(sent)
        await writer.drain()
        # Only a server that ignored its deadline reaches this bound, however busy the machine.
        answer = await asyncio.wait_for(reader.read(), within_deadline(header_timeout_s))
        return answer, time.monotonic() - started
    finally:
        writer.close()


HALF_SENT = [b"", b"GET /healthz HTTP/1.1\r\n", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "]


async def test_half_sent_headers_are_cut_off_and_too_many_or_too_large_are_refused(serve: Serve) -> None:
    too_many = b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADER_COUNT + 1))
    too_large = b"X-Big: " + b"a" * (MAX_HEADER_BYTES + 1)
    async with serve(HEADER_TIMEOUT_S) as base_url:
        address = _address(base_url)
        half_sent = await asyncio.gather(*(_answer(address, sent, HEADER_TIMEOUT_S) for sent in HALF_SENT))
        refused = [
            (await _answer(address, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers, HEADER_TIMEOUT_S))[0]
            for headers in (too_many + b"\r\n", too_large)
        ]
        async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
            health = await client.get("/healthz")

    for answer, waited in half_sent:
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert HEADER_TIMEOUT_S <= waited + 0.05  # the deadline, not something sooner, ended it
    for answer in refused:
        assert answer.startswith(b"HTTP/1.1 431 "), answer
    assert health.status_code == 200


async def test_healthz_answers_while_60_connections_hold_half_their_headers(serve: Serve) -> None:
    half = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-"
    async with serve(PATIENT_TIMEOUT_S) as base_url:
        address = _address(base_url)
        held = [asyncio.create_task(_answer(address, half, PATIENT_TIMEOUT_S)) for _ in range(60)]
        try:
            # Counted, not timed: every answer comes while all 60 connections are still held (their
            # deadline is far off); a server that served them first would answer only after cutting them off.
            async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
                for _ in range(5):
                    assert (await client.get("/healthz")).status_code == 200
                    assert not any(task.done() for task in held), "answered only once a held connection ended"
        finally:
            for task in held:
                task.cancel()
            await asyncio.gather(*held, return_exceptions=True)
