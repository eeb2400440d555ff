"""A lean asynchronous Ethereum JSON-RPC client with request batching.

web3's AsyncWeb3 re-validates the chain id and runs a middleware stack on every call; a facilitator makes
several reads per payment, so this client speaks JSON-RPC directly over one pooled `httpx.AsyncClient`
and sends independent reads as one batch (one round trip).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
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

    def __init__(
        self, url: str, *, timeout_s: float = 10.0, transport: httpx.AsyncBaseTransport | None = None
    ):
        self.url = url
        self._ids = itertools.count(1)
        self._http = httpx.AsyncClient(
            timeout=timeout_s,
            transport=transport,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
            headers={"content-type": "application/json"},
        )

    async def aclose(self) -> None:
        """Close the underlying connection pool."""
        await self._http.aclose()

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
        try:
            response = await self._http.post(self.url, content=orjson.dumps(body))
        except httpx.HTTPError as exc:
            raise ChainUnavailableError(f"RPC node unreachable: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise ChainUnavailableError(f"RPC node answered HTTP {response.status_code}")
        try:
            return orjson.loads(response.content)
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
