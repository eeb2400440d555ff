"""A minimal HTTP/1.1 keep-alive client on asyncio streams, used as the benchmark's load generator.

httpx costs 2-3 ms of client CPU per request at high concurrency on two cores (perf-baselines finding
8), as much as the servers under test, so requests are pre-serialised to bytes before timing and this
client does nothing per request but write them and read the answer: status line, headers, and a body
framed by Content-Length or chunked encoding. It speaks only to servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Answer", "HttpConnection", "HttpError", "build_request", "run_requests"]

_HEADER_LIMIT_BYTES = 64 * 1024
_TIMEOUT_S = 180.0


class HttpError(Exception):
    """The server's answer could not be read as HTTP/1.1."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One response: status, body, and how long the request took (seconds, monotonic clock)."""

    status: int
    body: bytes
    latency_s: float


def build_request(
    host: str,
    port: int,
    method: str,
    path: str,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The complete bytes of one HTTP/1.1 request with a JSON body (or none), keep-alive, plus `headers`."""
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (
        f"{method} {path} HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{extra}"
        "\r\n"
    )
    return head.encode("ascii") + body


class HttpConnection:
    """One keep-alive TCP connection; requests on it are sent one at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        """Connect (again, if the server closed the previous connection)."""
        await self.close()
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        """Close the connection if it is open."""
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass  # the peer already went away; nothing is left to release
            self._reader, self._writer = None, None

    async def send(self, request: bytes) -> Answer:
        """Send pre-built request bytes and read the whole response.

        Raises:
            HttpError: the response is not well-formed HTTP/1.1.
            TimeoutError: no complete response within three minutes.
        """
        if self._reader is None or self._writer is None:
            await self.open()
        reader, writer = self._reader, self._writer
        if reader is None or writer is None:
            raise HttpError(f"could not connect to {self.host}:{self.port}")
        started = time.monotonic()
        status, body, keep_alive = await asyncio.wait_for(_exchange(reader, writer, request), _TIMEOUT_S)
        elapsed = time.monotonic() - started
        if not keep_alive:
            await self.close()
        return Answer(status, body, elapsed)


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[int, bytes, bool]:
    """Write one request and read its response: (status, body, whether the connection stays open)."""
    writer.write(request)
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise HttpError("the server closed the connection before answering") from exc
    if len(head) > _HEADER_LIMIT_BYTES:
        raise HttpError("response headers are too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise HttpError(f"not an HTTP/1.1 status line: {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(parts[1]), body, headers.get("connection", "").lower() != "close"


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            # Trailers, if any, end with an empty line.
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


async def run_requests(
    targets: Sequence[tuple[str, int]], requests: Sequence[bytes], *, concurrency: int
) -> tuple[list[Answer], float]:
    """Send every request once over `concurrency` connections and return the answers (in request order)
    and the wall time in seconds from the first send to the last answer.

    Connection `i` goes to `targets[i % len(targets)]`, so several servers share the load evenly. The
    connections are opened before the clock starts; each takes the next unsent request when it is free.
    """
    connections = [HttpConnection(*targets[i % len(targets)]) for i in range(concurrency)]
    await asyncio.gather(*(c.open() for c in connections))
    answers: list[Answer | None] = [None] * len(requests)
    pending = iter(range(len(requests)))

    async def worker(connection: HttpConnection) -> None:
        for index in pending:
            answers[index] = await connection.send(requests[index])

    started = time.monotonic()
    try:
        await asyncio.gather(*(worker(c) for c in connections))
        elapsed = time.monotonic() - started
    finally:
        await asyncio.gather(*(c.close() for c in connections))
    return [a for a in answers if a is not None], elapsed
