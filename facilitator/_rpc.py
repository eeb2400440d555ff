"""A lean asynchronous Ethereum JSON-RPC client with request batching.

web3's AsyncWeb3 re-validates the chain id and runs a middleware stack on every call; a facilitator makes
several reads per payment, so this client speaks JSON-RPC directly and sends independent reads as one
batch (one round trip). It uses aiohttp's keep-alive pool (as web3's own async provider does): measured
against anvil it costs about 0.12 ms of CPU per call, where httpx costs 0.8 ms alone and 3.9 ms at 50
concurrent calls (its pool bookkeeping grows with the number of connections).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from ._errors import ChainUnavailableError, RpcError

__all__ = ["RpcCall", "RpcClient"]


@dataclass(frozen=True, slots=True)
class RpcCall:
    """One JSON-RPC method call, for `RpcClient.batch`."""

    method: str
    params: Sequence[Any]


class RpcClient:
    """JSON-RPC over HTTP. Transport failures raise ChainUnavailableError; error replies raise RpcError."""

    def __init__(self, url: str, *, timeout_s: float = 10.0, max_connections: int = 64):
        self.url = url
        self._ids = itertools.count(1)
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._max_connections = max_connections
        # Made on first use, inside the event loop that will use it.
        self._session: aiohttp.ClientSession | None = None

    async def aclose(self) -> None:
        """Close the underlying connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, method: str, *params: Any) -> Any:
        """Call one method and return its `result`."""
        reply = await self._post(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        )
        return _result(reply)

    async def batch(self, calls: Sequence[RpcCall]) -> list[Any | RpcError]:
        """Send `calls` in one round trip; each slot holds the result or the RpcError for that call."""
        if not calls:
            return []
        first = next(self._ids)
        body = [
            {"jsonrpc": "2.0", "id": first + i, "method": c.method, "params": list(c.params)}
            for i, c in enumerate(calls)
        ]
        for _ in range(len(calls) - 1):
            next(self._ids)
        replies = await self._post(body)
        if not isinstance(replies, list):
            raise ChainUnavailableError(f"RPC node answered a batch with {type(replies).__name__}")
        by_id = {r.get("id"): r for r in replies if isinstance(r, dict)}
        out: list[Any | RpcError] = []
        for i in range(len(calls)):
            reply = by_id.get(first + i)
            if reply is None:
                raise ChainUnavailableError("RPC node dropped a call from a batch")
            try:
                out.append(_result(reply))
            except RpcError as exc:
                out.append(exc)
        return out

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
            raise ChainUnavailableError(f"RPC node unreachable: {type(exc).__name__}: {exc}") from exc
        if status != 200:
            raise ChainUnavailableError(f"RPC node answered HTTP {status}")
        try:
            return orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise ChainUnavailableError("RPC node answered with invalid JSON") from exc


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
