"""A JSON-RPC client to the real node that remembers every call it made, to see what a scan asks for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a_x402.facilitator import RpcCall, RpcClient, RpcError

__all__ = ["RecordingRpc"]


class RecordingRpc(RpcClient):
    """An `RpcClient` that records (method, params) of each call, batched calls one by one."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.calls: list[tuple[str, list[Any]]] = []

    async def call(self, method: str, *params: Any) -> Any:
        """Record the call, then make it."""
        self.calls.append((method, list(params)))
        return await super().call(method, *params)

    async def batch(self, calls: Sequence[RpcCall]) -> list[Any | RpcError]:
        """Record each call of the batch, then send it."""
        self.calls += [(call.method, list(call.params)) for call in calls]
        return await super().batch(calls)

    def made(self, method: str) -> list[list[Any]]:
        """The params of every `method` call recorded since `calls` was last cleared, in order."""
        return [params for name, params in self.calls if name == method]
