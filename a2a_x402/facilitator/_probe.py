"""One look at the chain for operators: chain id, head, and each relayer's balance and next nonce.

Read in one JSON-RPC batch (one round trip), for `/readyz` and `/metrics` of both services; every call
keeps to the RPC client's timeout.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ._errors import ChainUnavailableError, RpcError
from ._rpc import RpcCall, RpcClient

__all__ = ["ChainStatus", "RelayerStatus", "read_chain_status"]


@dataclass(frozen=True, slots=True)
class RelayerStatus:
    """A relayer account as the node sees it: its balance and the nonce its next transaction takes."""

    address: str
    balance_wei: int
    next_nonce: int


@dataclass(frozen=True, slots=True)
class ChainStatus:
    """The node's chain id and head block, when it was read, and the relayers asked about."""

    chain_id: int
    head_block: int
    head_timestamp: int
    read_at: float
    relayers: tuple[RelayerStatus, ...]

    @property
    def head_lag_s(self) -> float:
        """How far the head block's timestamp is behind the wall clock (negative when it is ahead)."""
        return self.read_at - self.head_timestamp


def _value(result: object, what: str) -> object:
    if isinstance(result, RpcError):
        raise ChainUnavailableError(f"the node refused {what}: {result.message}")
    return result


async def read_chain_status(rpc: RpcClient, relayers: Sequence[str] = ()) -> ChainStatus:
    """The chain as `rpc`'s node sees it now, with the balance and pending nonce of each of `relayers`.

    Raises:
        ChainUnavailableError: the node could not be reached or refused one of the reads.
    """
    calls = [RpcCall("eth_chainId", []), RpcCall("eth_getBlockByNumber", ["latest", False])]
    for address in relayers:
        calls += [
            RpcCall("eth_getBalance", [address, "latest"]),
            RpcCall("eth_getTransactionCount", [address, "pending"]),
        ]
    results = await rpc.batch(calls)
    read_at = time.time()
    chain_id = _value(results[0], "eth_chainId")
    block = _value(results[1], "eth_getBlockByNumber")
    if not isinstance(chain_id, str) or not isinstance(block, dict):
        raise ChainUnavailableError("the node answered the chain reads with something else")
    statuses = []
    for i, address in enumerate(relayers):
        balance = _value(results[2 + 2 * i], "eth_getBalance")
        nonce = _value(results[3 + 2 * i], "eth_getTransactionCount")
        statuses.append(RelayerStatus(address, int(str(balance), 16), int(str(nonce), 16)))
    return ChainStatus(
        chain_id=int(chain_id, 16),
        head_block=int(block["number"], 16),
        head_timestamp=int(block["timestamp"], 16),
        read_at=read_at,
        relayers=tuple(statuses),
    )
