"""The payer's few words with a chain: a JSON-RPC node read before paying by Permit2 (the token's allowance
to Permit2, its EIP-2612 state) and the one transaction it ever sends, the approval of Permit2.

Each node is asked its chain id before its first answer is believed, so a URL of another chain is refused
rather than read. Every call has a timeout; a node that cannot answer is a `ChainError` in words, never a
class name, and never with the request's parameters (they may carry a signed transaction).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from eth_abi.abi import decode, encode
from eth_utils.abi import function_signature_to_4byte_selector

from a2a_x402.facilitator.wire import chain_id_from_caip2
from a2a_x402.observability import unreachable_reason

from ._errors import ChainError

__all__ = ["Chain", "ChainAccess", "RpcUrls", "call_data"]

RpcUrls = Mapping[str, str] | str
"""The payer's JSON-RPC nodes: one per CAIP-2 network, or one URL for whatever network its chain is."""

_ids = itertools.count(1)


def call_data(signature: str, types: Sequence[str] = (), args: Sequence[Any] = ()) -> bytes:
    """The calldata of `signature` (e.g. ``allowance(address,address)``) with `args` ABI-encoded."""
    return function_signature_to_4byte_selector(signature) + encode(list(types), list(args))


class Chain:
    """One JSON-RPC node, believed only once it said it is the chain of `network`."""

    def __init__(self, http: httpx.AsyncClient, url: str, network: str, *, timeout_s: float) -> None:
        self._http = http
        self._url = url
        self.network = network
        self.chain_id = chain_id_from_caip2(network)
        self._timeout_s = timeout_s
        self._checked = False

    @classmethod
    async def of_node(cls, http: httpx.AsyncClient, url: str, *, timeout_s: float) -> Chain:
        """The node at `url`, for the network its chain id says it is.

        Raises:
            ChainError: the node did not answer its chain id.
        """
        answered = int(str(await _rpc(http, url, "the RPC node", "eth_chainId", [], timeout_s)), 16)
        chain = cls(http, url, f"eip155:{answered}", timeout_s=timeout_s)
        chain._checked = True
        return chain

    async def request(self, method: str, params: Sequence[Any]) -> Any:
        """The node's `result` for `method`.

        Raises:
            ChainError: no answer, an error answer, or the node is another chain's.
        """
        if not self._checked:
            answered = int(str(await self._request("eth_chainId", [])), 16)
            if answered != self.chain_id:
                raise ChainError(
                    f"the payer's RPC node for {self.network} is chain {answered}, not {self.chain_id}"
                )
            self._checked = True
        return await self._request(method, params)

    async def call(self, to: str, data: bytes) -> bytes:
        """`eth_call` of `data` at `to` in the latest block; the raw return data."""
        result = await self.request("eth_call", [{"to": to, "data": "0x" + data.hex()}, "latest"])
        if not isinstance(result, str) or not result.startswith("0x"):
            raise ChainError(f"the payer's RPC node for {self.network} answered eth_call with no data")
        return bytes.fromhex(result[2:])

    async def uint(self, to: str, signature: str, types: Sequence[str], args: Sequence[Any]) -> int | None:
        """A view returning one uint256, or None when the contract does not answer it so (a revert, no
        function, short data): how a token without EIP-2612 answers ``nonces(address)``."""
        try:
            returned = await self.call(to, call_data(signature, types, args))
        except ChainError as exc:
            if exc.reverted:
                return None
            raise
        if len(returned) != 32:
            return None
        (value,) = decode(["uint256"], returned)
        return int(value)

    async def _request(self, method: str, params: Sequence[Any]) -> Any:
        where = f"the payer's RPC node for {self.network}"
        return await _rpc(self._http, self._url, where, method, params, self._timeout_s)


async def _rpc(
    http: httpx.AsyncClient, url: str, where: str, method: str, params: Sequence[Any], timeout_s: float
) -> Any:
    """The `result` of one JSON-RPC call; `where` names the node in errors (never its URL, which may carry
    a provider's API key)."""
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": list(params)}
    try:
        response = await http.post(url, json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ChainError(f"{where} did not answer {method}: {unreachable_reason(exc)}") from None
    if response.status_code != httpx.codes.OK:
        raise ChainError(f"{where} answered {method} with HTTP {response.status_code}")
    try:
        document = response.json()
    except ValueError:
        raise ChainError(f"{where} answered {method} with no JSON") from None
    if not isinstance(document, dict):
        raise ChainError(f"{where} answered {method} with no JSON-RPC object")
    error = document.get("error")
    if error is not None:
        message = error.get("message") if isinstance(error, dict) else None
        text = str(message)[:200] if message else "an error"
        # A node says a call reverted in its message (anvil, geth: "execution reverted").
        raise ChainError(f"{where} refused {method}: {text}", reverted="revert" in text.lower())
    if "result" not in document:
        raise ChainError(f"{where} answered {method} without a result")
    return document["result"]


class ChainAccess:
    """The payer's nodes by network: `rpc_urls` as a mapping names each network's, a single URL serves any
    network its chain is (and refuses the others)."""

    def __init__(self, http: httpx.AsyncClient, rpc_urls: RpcUrls | None, *, timeout_s: float) -> None:
        self._http = http
        self._urls = rpc_urls
        self._timeout_s = timeout_s
        self._chains: dict[str, Chain] = {}

    def chain(self, network: str) -> Chain:
        """The node for `network`.

        Raises:
            ChainError: the payer has no RPC URL for it.
        """
        if network in self._chains:
            return self._chains[network]
        url = self._urls if isinstance(self._urls, str) else (self._urls or {}).get(network)
        if not url:
            raise ChainError(
                f"the payer has no RPC URL for {network}: it reads its Permit2 allowance there before paying "
                "by Permit2 (give Payer rpc_urls, or x402-pay --rpc-url / X402_PAYER_RPC_URL)"
            )
        chain = self._chains[network] = Chain(self._http, url, network, timeout_s=self._timeout_s)
        return chain
