"""Restoring JSON integers that went through a protobuf `Struct`.

A2A 1.0 carries metadata and data parts as `google.protobuf.Struct`/`Value`, which store every JSON number
as a double; the SDK serializes them back with `MessageToDict`, so an `x402Version` of 2 leaves the server
as `2.0`, which strict (Go, Rust) x402 clients reject. No A2A field is itself a double, so every integral
number in an A2A response is written back as an integer; in JSON `2` and `2.0` are the same number, so
nothing is lost. Applied to JSON bodies and to each server-sent event of the A2A routes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["IntegralNumbersMiddleware", "restore_integers"]

_MAX_EXACT = 2**53


def restore_integers(value: Any) -> Any:
    """`value` with every integral float that a double represents exactly turned into an int."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < _MAX_EXACT else value
    if isinstance(value, dict):
        return {key: restore_integers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [restore_integers(item) for item in value]
    return value


def _rewrite_json(body: bytes) -> bytes:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    return orjson.dumps(restore_integers(document))


def _rewrite_event_lines(text: bytes) -> bytes:
    lines = text.split(b"\n")
    for index, line in enumerate(lines):
        if line.startswith(b"data:"):
            lines[index] = b"data: " + _rewrite_json(line[5:].strip())
    return b"\n".join(lines)


class IntegralNumbersMiddleware:
    """ASGI middleware applying `restore_integers` to the JSON and SSE responses of the paths `applies` to."""

    def __init__(self, app: ASGIApp, *, applies: Callable[[str], bool]) -> None:
        self.app = app
        self.applies = applies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.applies(scope["path"]):
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _Rewriter(send))


class _Rewriter:
    """The `send` of one response: JSON bodies are rewritten whole, event streams line by line."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._mode = ""
        self._start: Message = {}
        self._buffer = bytearray()

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            content_type = _header(message, b"content-type")
            if b"text/event-stream" in content_type:
                self._mode = "sse"
            else:
                self._mode = "json" if b"json" in content_type else ""
            if self._mode == "json":
                self._start = message  # sent with the rewritten body, whose length changes
            else:
                await self._send(message)
            return
        if message["type"] != "http.response.body" or not self._mode:
            await self._send(message)
            return
        self._buffer.extend(message.get("body", b""))
        more = message.get("more_body", False)
        if self._mode == "sse":
            # Only whole lines are rewritten; a line cut by a chunk boundary waits for its end.
            cut = self._buffer.rfind(b"\n") + 1 if more else len(self._buffer)
            ready = bytes(self._buffer[:cut])
            del self._buffer[:cut]
            await self._send({**message, "body": _rewrite_event_lines(ready)})
            return
        if more:
            return
        body = _rewrite_json(bytes(self._buffer))
        headers = [(k, v) for k, v in self._start["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await self._send({**self._start, "headers": headers})
        await self._send({"type": "http.response.body", "body": body})


def _header(message: Message, name: bytes) -> bytes:
    for key, value in message.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return b""
