"""The HTTP service's body bounds, settings of its own, against real uvicorn over raw sockets: a body still
arriving at its deadline (`X402_FACILITATOR_BODY_TIMEOUT_S`) is answered 408 with the operation's body and
the connection closed, nothing claimed; `/healthz` answers while slow bodies are held; a body trickled in
within the deadline is served; the body size (`X402_FACILITATOR_MAX_BODY_BYTES`) is refused past the
setting, declared or chunked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import orjson
import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S, within_deadline
from tests.fixtures.facilitator import make_requirements

from .conftest import StartService
from .payments import claim_rows

BODY_TIMEOUT_S = 0.5
PATIENT_TIMEOUT_S = 60.0
"""A body deadline far beyond any answer the server gives meanwhile, however busy the machine."""
Body = dict[str, Any]


def _address(base_url: str) -> tuple[str, int]:
    host, port = base_url.removeprefix("http://").split(":")
    return host, int(port)


def _head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def _exchange(
    address: tuple[str, int], *parts: bytes, pause_s: float = 0.0, bound_s: float = BODY_TIMEOUT_S
) -> bytes:
    """Everything the server sends, to EOF, after `parts` (each written on its own, `pause_s` apart)."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(pause_s)
        # Only a server that ignored its deadline reaches this bound, however busy the machine.
        return await asyncio.wait_for(reader.read(), within_deadline(bound_s))
    finally:
        writer.close()


def _answer_of(raw: bytes) -> tuple[int, dict[str, str], Body]:
    head, _, content = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split(" ")[1]), headers, orjson.loads(content)


@pytest.fixture
def request_body(chain: DevChain, new_payer: Callable[..., str]) -> bytes:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    body = {
        "x402Version": 2,
        "paymentPayload": payload.to_json_dict(),
        "paymentRequirements": requirements.to_json_dict(),
    }
    return orjson.dumps(body)


@pytest.mark.parametrize("path", ["/verify", "/settle", "/settle/status"])
async def test_a_body_not_received_in_time_is_a_408_and_the_connection_is_closed(
    path: str, start_service: StartService, sqlite_url: str, request_body: bytes
) -> None:
    base_url = start_service(sqlite_url, facilitator_body_timeout_s=BODY_TIMEOUT_S)
    half = request_body[: len(request_body) // 2]

    started = time.monotonic()
    raw = await _exchange(_address(base_url), _head(path, len(request_body)) + half)
    waited = time.monotonic() - started

    # Read to EOF: the server closed the connection after answering.
    status, headers, answer = _answer_of(raw)
    assert (status, headers["connection"]) == (408, "close")
    assert BODY_TIMEOUT_S <= waited + 0.05  # the deadline, not something sooner, ended it
    message = f"the request body was not received within {BODY_TIMEOUT_S:g} s"
    if path == "/verify":
        assert answer["isValid"] is False
        assert (answer["invalidReason"], answer["invalidMessage"]) == (Reason.INVALID_PAYLOAD, message)
    else:
        assert answer["success"] is False
        assert (answer["errorReason"], answer["errorMessage"]) == (Reason.INVALID_PAYLOAD, message)
    assert await claim_rows(sqlite_url) == []


async def test_healthz_answers_while_slow_bodies_are_held_and_a_body_in_time_is_served(
    start_service: StartService, sqlite_url: str, request_body: bytes
) -> None:
    base_url = start_service(sqlite_url, facilitator_body_timeout_s=PATIENT_TIMEOUT_S)
    address = _address(base_url)
    head = _head("/verify", len(request_body))
    held = [
        asyncio.create_task(_exchange(address, head + request_body[:10], bound_s=PATIENT_TIMEOUT_S))
        for _ in range(30)
    ]
    try:
        # Counted, not timed: every answer comes while all 30 slow bodies are still held.
        async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
            for _ in range(5):
                assert (await client.get("/healthz")).status_code == 200
                assert not any(task.done() for task in held), "a held request ended before its deadline"
        third = len(request_body) // 3
        parts = (head + request_body[:third], request_body[third : 2 * third], request_body[2 * third :])
        raw = await asyncio.wait_for(_exchange_keep_alive(address, parts), within_deadline(1.0))
    finally:
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
    status, _, answer = _answer_of(raw)
    assert (status, answer["isValid"]) == (200, True)


async def _exchange_keep_alive(address: tuple[str, int], parts: tuple[bytes, ...]) -> bytes:
    """The one answer to a request sent in `parts`, 0.1 s apart, on a connection the server keeps open."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.1)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        return head + await reader.readexactly(length)
    finally:
        writer.close()


async def _chunks(content: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(content), 1024):
        yield content[start : start + 1024]


async def test_the_body_limit_is_the_setting_declared_or_chunked(
    start_service: StartService, sqlite_url: str, request_body: bytes
) -> None:
    limit = len(request_body) + 100
    base_url = start_service(sqlite_url, facilitator_max_body_bytes=max(limit, 1024))
    document = orjson.loads(request_body)
    document["paymentPayload"]["resource"] = {"url": "https://x.example/", "description": "d" * limit}
    too_large = orjson.dumps(document)

    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
        served = await client.post("/verify", content=request_body)
        declared = await client.post("/verify", content=too_large)
        chunked = await client.post("/verify", content=_chunks(too_large))

    assert served.json()["isValid"] is True
    for refused in (declared, chunked):
        assert refused.status_code == 200
        assert refused.json()["invalidReason"] == Reason.INVALID_PAYLOAD
        assert refused.json()["invalidMessage"] == f"the body must be at most {max(limit, 1024)} bytes"
