"""A lean asynchronous Ethereum JSON-RPC client with request batching.

web3's AsyncWeb3 re-validates the chain id and runs a middleware stack on every call; a facilitator makes
several reads per payment, so this client speaks JSON-RPC directly and sends independent reads as one
batch (one round trip). It uses aiohttp's keep-alive pool (as web3's own async provider does): measured
against anvil it costs about 0.12 ms of CPU per call, where httpx costs 0.8 ms alone and 3.9 ms at 50
concurrent calls (its pool bookkeeping grows with the number of connections).

Calls and batches made in the same turn of the event loop also travel together: each is queued, and at
the end of the turn everything queued goes out as one JSON-RPC batch (up to `MAX_BATCH` calls an HTTP
request). Fifty concurrent settlements then share their verifications, sends and receipt polls in a few
HTTP requests instead of one each; a profile at concurrency 50 showed each HTTP request costing more
CPU in its socket write (the kernel's loopback work is charged to the sender) than in building it. A
JSON-RPC batch is answered per call, so one call's error reply stays its own; a transport failure fails
every call of the request that carried it, as it would have failed each alone.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from ._errors import ChainUnavailableError, RpcError

__all__ = ["MAX_BATCH", "RpcCall", "RpcClient", "shown_origin", "unreachable_reason"]

MAX_BATCH = 200
"""The most calls one HTTP request carries (public nodes refuse batches of a few hundred or more)."""


@dataclass(frozen=True, slots=True)
class RpcCall:
    """One JSON-RPC method call, for `RpcClient.batch`."""

    method: str
    params: Sequence[Any]


@dataclass(eq=False, slots=True)
class _Queued:
    """A `call` (`single`) or `batch` waiting for the end of the event loop's turn."""

    bodies: list[dict[str, Any]]
    single: bool
    future: asyncio.Future[list[Any]] = field(repr=False)


class RpcClient:
    """JSON-RPC over HTTP. Transport failures raise ChainUnavailableError; error replies raise RpcError."""

    def __init__(self, url: str, *, timeout_s: float = 10.0, max_connections: int = 64):
        self.url = url
        self._ids = itertools.count(1)
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._max_connections = max_connections
        # Made on first use, inside the event loop that will use it.
        self._session: aiohttp.ClientSession | None = None
        self._queue: list[_Queued] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        """Close the underlying connection pool (requests still under way fail)."""
        for task in list(self._sending):
            task.cancel()
        await asyncio.gather(*self._sending, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, *params: Any) -> Any:
        """Call one method and return its `result`."""
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        (reply,) = await self._enqueue([body], single=True)
        return _result(reply)

    async def batch(self, calls: Sequence[RpcCall]) -> list[Any | RpcError]:
        """Send `calls` in one round trip; each slot holds the result or the RpcError for that call."""
        if not calls:
            return []
        bodies = [
            {"jsonrpc": "2.0", "id": next(self._ids), "method": c.method, "params": list(c.params)}
            for c in calls
        ]
        out: list[Any | RpcError] = []
        for reply in await self._enqueue(bodies, single=False):
            try:
                out.append(_result(reply))
            except RpcError as exc:
                out.append(exc)
        return out

    def _enqueue(self, bodies: list[dict[str, Any]], *, single: bool) -> asyncio.Future[list[Any]]:
        loop = asyncio.get_running_loop()
        if not self._queue:
            loop.call_soon(self._flush)
        queued = _Queued(bodies, single, loop.create_future())
        self._queue.append(queued)
        return queued.future

    def _flush(self) -> None:
        """Send what this turn of the event loop queued, in HTTP requests of at most `MAX_BATCH` calls."""
        queued, self._queue = self._queue, []
        group: list[_Queued] = []
        size = 0
        for entry in queued:
            if group and size + len(entry.bodies) > MAX_BATCH:
                self._send(group)
                group, size = [], 0
            group.append(entry)
            size += len(entry.bodies)
        if group:
            self._send(group)

    def _send(self, group: list[_Queued]) -> None:
        task = asyncio.get_running_loop().create_task(self._exchange(group))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _exchange(self, group: list[_Queued]) -> None:
        """One HTTP request for `group`: a lone `call` as a JSON-RPC object, anything else as a batch."""
        try:
            if len(group) == 1 and group[0].single:
                replies = [await self._post(group[0].bodies[0])]
            else:
                answer = await self._post([body for entry in group for body in entry.bodies])
                if not isinstance(answer, list):
                    raise ChainUnavailableError(f"RPC node answered a batch with {type(answer).__name__}")
                by_id = {r.get("id"): r for r in answer if isinstance(r, dict)}
                replies = [by_id.get(body["id"]) for entry in group for body in entry.bodies]
        except asyncio.CancelledError:
            self._fail(group, "the RPC client was closed")
            raise
        except ChainUnavailableError as exc:
            self._fail(group, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - every caller of this request must get an answer
            self._fail(group, f"RPC request failed: {type(exc).__name__}: {exc}")
            return
        start = 0
        for entry in group:
            mine = replies[start : start + len(entry.bodies)]
            start += len(entry.bodies)
            if entry.future.done():
                continue  # its caller stopped waiting
            if any(reply is None for reply in mine):
                entry.future.set_exception(ChainUnavailableError("RPC node dropped a call from a batch"))
            else:
                entry.future.set_result(mine)

    @staticmethod
    def _fail(group: list[_Queued], message: str) -> None:
        for entry in group:
            if not entry.future.done():
                entry.future.set_exception(ChainUnavailableError(message))

    async def _post(self, body: object) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                timeout=self._timeout,
                headers={"content-type": "application/json"},
            )
        try:
            async with self._session.post(self.url, data=orjson.dumps(body)) as response:
                content = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChainUnavailableError(
                f"RPC node unreachable ({shown_origin(self.url)}): {unreachable_reason(exc)}"
            ) from exc
        if status != 200:
            raise ChainUnavailableError(f"RPC node answered HTTP {status}")
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise ChainUnavailableError("RPC node answered with invalid JSON") from exc


def shown_origin(url: str) -> str:
    """`url`'s scheme, host and port, for messages: a provider's URL often carries an API key in its path,
    query or user part."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}" if parts.hostname else "(an unparseable URL)"


def unreachable_reason(exc: BaseException) -> str:
    """One short reason a request got no answer (`connection refused`), for aiohttp's and httpx's errors
    alike: the first OS error among its causes. The clients' own messages repeat the address and, for a host
    with several addresses, every attempt's error (aiohttp), or say only "All connection attempts failed"."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, TimeoutError | aiohttp.ServerTimeoutError):
            return "no answer in time"
        cause = link.os_error if isinstance(link, aiohttp.ClientConnectorError) else link
        if isinstance(cause, socket.gaierror):
            return "its host name does not resolve"
        if isinstance(cause, OSError) and cause.errno:
            return os.strerror(cause.errno).lower()
        link = link.__cause__ or link.__context__
    return type(exc).__name__


def _result(reply: Any) -> Any:
    if not isinstance(reply, dict):
        raise ChainUnavailableError("RPC node answered with a non-object")
    error = reply.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise RpcError(-32000, str(error), None)
        raise RpcError(int(error.get("code", -32000)), str(error.get("message", "")), error.get("data"))
    if "result" not in reply:
        raise ChainUnavailableError("RPC reply has neither result nor error")
    return reply["result"]
