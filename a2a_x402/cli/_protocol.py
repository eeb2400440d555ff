"""The HTTP protocol of a `serve` command: uvicorn's httptools protocol with bounded request headers.

uvicorn bounds neither how long a client may take to send a request's headers (its keep-alive timeout only
runs between requests, and never on a fresh connection), nor how many headers it sends or how large they
are (llhttp has no limit). A client sending half its headers would hold its connection for ever; enough of
them hold every file descriptor. Here a request's headers must be complete within `header_timeout_s` of
the connection's opening or of the request's first byte, and within `max_header_count` headers and
`max_header_bytes` (request line and headers): past the deadline the connection gets 408 and is closed,
past a size 431 and is closed. The body's own deadline is the app's (it is read by an ASGI middleware).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HeaderLimits", "bounded_http_protocol"]

_TIMEOUT_ANSWER = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_TOO_LARGE_ANSWER = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
)


class _HeadersTooLarge(Exception):
    """Raised from the parser's callback to stop parsing a request whose headers passed a bound."""


@dataclass(frozen=True, slots=True)
class HeaderLimits:
    """The header bounds of `bounded_http_protocol` (see the module); the defaults are the merchant's
    settings' (`X402_HEADER_TIMEOUT_S`, `X402_MAX_HEADER_COUNT`, `X402_MAX_HEADER_BYTES`)."""

    header_timeout_s: float = 10.0
    max_header_count: int = 100
    max_header_bytes: int = 16 * 1024


class _BoundedHttpProtocol(HttpToolsProtocol):
    limits: HeaderLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        # From the connection's opening or a request's first byte until its headers are complete.
        self._in_headers = True
        self._header_count = 0
        self._header_bytes = 0
        self._headers_too_large = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._headers_too_large:
            return
        super().data_received(data)
        # httptools buffers a header until its line ends, so the bytes are counted as they arrive: all of a
        # read the parser took without completing the headers was headers.
        if self._in_headers and not self.transport.is_closing():
            self._header_bytes += len(data)
            if self._header_bytes > self.limits.max_header_bytes:
                self._headers_too_large = True
                self._refuse(_TOO_LARGE_ANSWER)

    def send_400_response(self, msg: str) -> None:
        if self._headers_too_large:  # the parser stopped at the callback that raised _HeadersTooLarge
            self._refuse(_TOO_LARGE_ANSWER)
            return
        super().send_400_response(msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._header_count = 0
        self._header_bytes = 0
        self._arm()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_header_count:
            self._headers_too_large = True
            raise _HeadersTooLarge
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._disarm()
        super().on_headers_complete()

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.limits.header_timeout_s, self._headers_overdue)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_overdue(self) -> None:
        self._header_deadline = None
        self._refuse(_TIMEOUT_ANSWER)

    def _refuse(self, answer: bytes) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        self.transport.write(answer)
        self.transport.close()


def bounded_http_protocol(limits: HeaderLimits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol bounded by `limits`: pass it as `uvicorn.Config(http=...)`."""
    return type("BoundedHttpProtocol", (_BoundedHttpProtocol,), {"limits": limits})
