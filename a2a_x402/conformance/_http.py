"""Talking to an untrusted merchant over HTTP: timeouts, a size cap, no redirects, and the evidence kept.

Everything the merchant sends is untrusted. Every request has a timeout (connect, read and a deadline for
the whole answer, streams included), an answer larger than ``max_bytes`` is cut off and refused, redirects
are never followed (a redirect is an answer like any other, and the checks expecting JSON fail on it), and a
body that is not one JSON value is refused. Each of these raises ``MerchantFault`` carrying the exchange so
far, which the runner reports as the failed check's evidence; nothing the merchant does can crash the kit.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from a2a_x402.observability import failure_reason

__all__ = ["Answer", "Exchange", "MerchantFault", "UntrustedHttp", "trim"]

JSON = Any
_EVIDENCE_CHARS = 1500
_SHOWN_HEADERS = frozenset(
    {"a2a-version", "a2a-extensions", "x-a2a-extensions", "content-type", "location", "vary", "etag"}
)


def trim(text: str, limit: int = _EVIDENCE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


@dataclass
class Exchange:
    """One request and what came back, trimmed for a report."""

    request: str
    answer: str = "(no answer)"

    def as_dict(self) -> dict[str, str]:
        """The JSON form of the evidence."""
        return {"request": self.request, "answer": self.answer}


class MerchantFault(Exception):
    """The merchant's answer could not be used: timeout, too large, not JSON, a redirect, a broken stream."""

    def __init__(self, message: str, exchange: Exchange | None = None) -> None:
        super().__init__(message)
        self.exchange = exchange


@dataclass
class Answer:
    """An HTTP answer: status, headers and the JSON body (``None`` when there was none)."""

    status: int
    headers: httpx.Headers
    body: JSON
    exchange: Exchange = field(repr=False)


def _describe_request(method: str, url: str, headers: Mapping[str, str], body: JSON) -> str:
    shown = {name: value for name, value in headers.items() if name.lower() in _SHOWN_HEADERS}
    text = f"{method} {url} {json.dumps(shown)}"
    if body is not None:
        text += " " + json.dumps(body, separators=(",", ":"))
    return trim(text)


def _describe_answer(status: int, headers: httpx.Headers, text: str) -> str:
    shown = {name: value for name, value in headers.items() if name.lower() in _SHOWN_HEADERS}
    return trim(f"{status} {json.dumps(shown)} {text}")


class UntrustedHttp:
    """An httpx client that never trusts the merchant: bounded in time and size, redirects not followed."""

    def __init__(
        self,
        *,
        timeout_s: float = 20.0,
        max_bytes: int = 2 * 1024 * 1024,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            follow_redirects=False,
            transport=transport,
        )

    async def aclose(self) -> None:
        """Close the connections."""
        await self._client.aclose()

    async def request(
        self, method: str, url: str, *, headers: Mapping[str, str], body: JSON = None, params: JSON = None
    ) -> Answer:
        """One request; the answer's JSON body parsed (an empty body is ``None``).

        Raises:
            MerchantFault: no answer in time, an answer over the size cap, or a body that is not JSON.
        """
        exchange = Exchange(_describe_request(method, url, headers, body))
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client.stream(
                    method, url, headers=dict(headers), json=body, params=params
                ) as response:
                    raw = await self._read_capped(response, exchange)
        except TimeoutError:
            raise MerchantFault(f"no complete answer within {self.timeout_s:g} s", exchange) from None
        except httpx.HTTPError as error:
            raise MerchantFault(f"the request failed: {failure_reason(error)}", exchange) from None
        text = raw.decode("utf-8", errors="replace")
        exchange.answer = _describe_answer(response.status_code, response.headers, text)
        return Answer(
            response.status_code, response.headers, _parse_json(raw, response.status_code, exchange), exchange
        )

    async def stream_events(
        self, url: str, *, headers: Mapping[str, str], body: JSON, events: list[JSON]
    ) -> Answer:
        """POST ``body`` and read a server-sent event stream into ``events`` until the server closes it.

        Returns the answer with ``body`` ``None`` for a stream, or the JSON body of an answer that is not a
        stream (an error). The exchange's answer lists the events received.

        Raises:
            MerchantFault: no end of stream within the timeout, too much data, or an event that is not JSON.
        """
        exchange = Exchange(_describe_request("POST", url, headers, body))
        received: list[str] = []
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._client.stream("POST", url, headers=dict(headers), json=body) as response:
                    if not response.headers.get("content-type", "").startswith("text/event-stream"):
                        raw = await self._read_capped(response, exchange)
                        text = raw.decode("utf-8", errors="replace")
                        exchange.answer = _describe_answer(response.status_code, response.headers, text)
                        parsed = _parse_json(raw, response.status_code, exchange)
                        return Answer(response.status_code, response.headers, parsed, exchange)
                    size = 0
                    async for data in _sse_data(response.aiter_lines()):
                        size += len(data)
                        if size > self.max_bytes:
                            raise MerchantFault(f"the stream sent more than {self.max_bytes} bytes", exchange)
                        received.append(data)
                        exchange.answer = trim(f"{response.status_code} stream: " + "\n".join(received))
                        try:
                            events.append(orjson.loads(data))
                        except orjson.JSONDecodeError:
                            raise MerchantFault("a stream event is not JSON", exchange) from None
        except TimeoutError:
            raise MerchantFault(f"the stream did not end within {self.timeout_s:g} s", exchange) from None
        except httpx.HTTPError as error:
            raise MerchantFault(f"the stream failed: {failure_reason(error)}", exchange) from None
        return Answer(response.status_code, response.headers, None, exchange)

    async def _read_capped(self, response: httpx.Response, exchange: Exchange) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            exchange.answer = _describe_answer(response.status_code, response.headers, "(body not read)")
            raise MerchantFault(
                f"the answer declares {declared} bytes, over the cap of {self.max_bytes}", exchange
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                exchange.answer = _describe_answer(response.status_code, response.headers, "(cut off)")
                raise MerchantFault(f"the answer is larger than the cap of {self.max_bytes} bytes", exchange)
            chunks.append(chunk)
        return b"".join(chunks)


def _parse_json(raw: bytes, status: int, exchange: Exchange) -> JSON:
    if not raw.strip():
        return None
    try:
        # orjson: a bounded nesting depth, where the standard parser can exhaust the C stack.
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise MerchantFault(f"the answer (HTTP {status}) is not JSON", exchange) from None


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    if data:
        yield "\n".join(data)
