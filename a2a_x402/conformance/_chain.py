"""Reading the chain the merchant settles on: was an authorization used, and what did its transaction move.

Plain Ethereum JSON-RPC (``eth_call``, ``eth_getTransactionReceipt``, ``eth_getLogs``, ``eth_blockNumber``)
over httpx with a timeout and a cap on the answer's size (a node is as untrusted as a merchant), so it works
against anvil, a testnet node or a hosted endpoint. EIP-3009 tokens expose ``authorizationState(authorizer,
nonce)`` and emit ``AuthorizationUsed(authorizer, nonce)``; a payment moved money exactly when that nonce is
used, which is how the kit tells "nothing moved" without comparing balances that other traffic changes.
A Permit2 witness transfer spends a bit of its owner's ``nonceBitmap`` at Permit2 (the same test; Permit2
logs no event for it, so its settlement is read from the transaction the receipt names).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from eth_utils.address import to_checksum_address

__all__ = ["PERMIT2_ADDRESS", "ChainError", "ChainReader", "Transfer"]

_AUTHORIZATION_STATE = "0xe94a0102"
_AUTHORIZATION_USED = "0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5"
_TRANSFER = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
_NONCE_BITMAP = "0x4fe02b44"  # nonceBitmap(address,uint256)
_ALLOWANCE = "0xdd62ed3e"  # allowance(address,address)
PERMIT2_ADDRESS = "0x000000000022D473030F116dDEE9F6B43aC78BA3"
"""Permit2, at the same address on every chain (spec §6.2)."""


class ChainError(Exception):
    """The chain's node did not answer, or answered something that is not a JSON-RPC result."""


@dataclass(frozen=True, slots=True)
class Transfer:
    """One ERC-20 ``Transfer`` log."""

    asset: str
    sender: str
    recipient: str
    value: int


def _word(address: str) -> str:
    return "0x" + address.lower().removeprefix("0x").rjust(64, "0")


def _uint(result: Any) -> int:
    """An ``eth_call`` answer read as one uint256 word.

    Raises:
        ChainError: the answer is not a hex word (a token without the function answers ``0x``).
    """
    try:
        if isinstance(result, str) and result.startswith("0x") and len(result) > 2:
            return int(result, 16)
    except ValueError:
        pass
    raise ChainError(f"eth_call: {result!r:.100} is not a uint256")


class ChainReader:
    """The few chain reads the checks need."""

    def __init__(self, rpc_url: str, *, timeout_s: float = 15.0, max_bytes: int = 2 * 1024 * 1024) -> None:
        self._rpc_url = rpc_url
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._http = httpx.AsyncClient(timeout=timeout_s, follow_redirects=False)
        self._ids = itertools.count(1)

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def call(self, method: str, params: list[Any]) -> Any:
        """One JSON-RPC call's result.

        Raises:
            ChainError: no answer within the timeout or the cap, or an answer without a result.
        """
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._http.stream("POST", self._rpc_url, json=body) as response:
                    raw = await self._read_capped(response)
            answer = orjson.loads(raw)
        except TimeoutError:
            raise ChainError(f"{method}: the node did not answer within {self._timeout_s:g} s") from None
        except (httpx.HTTPError, orjson.JSONDecodeError) as error:
            raise ChainError(f"{method}: the node did not answer usefully ({error})") from None
        if not isinstance(answer, dict) or "result" not in answer:
            raise ChainError(f"{method}: {answer!r:.300}")
        return answer["result"]

    async def _read_capped(self, response: httpx.Response) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise ChainError(
                f"the node's answer declares {declared} bytes, over the cap of {self._max_bytes}"
            )
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise ChainError(f"the node's answer is larger than the cap of {self._max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    async def chain_id(self) -> int:
        """``eth_chainId``."""
        return int(await self.call("eth_chainId", []), 16)

    async def block_number(self) -> int:
        """``eth_blockNumber``."""
        return int(await self.call("eth_blockNumber", []), 16)

    async def authorization_used(self, asset: str, authorizer: str, nonce: str) -> bool:
        """Whether the EIP-3009 ``nonce`` of ``authorizer`` is used on ``asset``."""
        data = _AUTHORIZATION_STATE + _word(authorizer)[2:] + nonce.lower().removeprefix("0x").rjust(64, "0")
        result = await self.call("eth_call", [{"to": asset, "data": data}, "latest"])
        return isinstance(result, str) and int(result, 16) != 0

    async def nonce_used(self, asset: str, owner: str, nonce: str) -> bool:
        """Whether the authorization ``nonce`` (0x hex) of ``owner`` is used: at the EIP-3009 token
        ``asset``, or at Permit2 when ``asset`` is ``PERMIT2_ADDRESS`` (a Permit2 authorization)."""
        if asset != PERMIT2_ADDRESS:
            return await self.authorization_used(asset, owner, nonce)
        value = int(nonce, 16)
        data = _NONCE_BITMAP + _word(owner)[2:] + hex(value >> 8)[2:].rjust(64, "0")
        bitmap = _uint(await self.call("eth_call", [{"to": PERMIT2_ADDRESS, "data": data}, "latest"]))
        return bool(bitmap >> (value & 0xFF) & 1)

    async def allowance(self, asset: str, owner: str, spender: str) -> int:
        """The ERC-20 allowance ``owner`` gave ``spender`` on ``asset``."""
        data = _ALLOWANCE + _word(owner)[2:] + _word(spender)[2:]
        return _uint(await self.call("eth_call", [{"to": asset, "data": data}, "latest"]))

    async def uses_of(self, asset: str, authorizer: str, nonce: str, from_block: int) -> list[str]:
        """The transactions since ``from_block`` that used ``authorizer``'s ``nonce``."""
        topics = [
            _AUTHORIZATION_USED,
            _word(authorizer),
            "0x" + nonce.lower().removeprefix("0x").rjust(64, "0"),
        ]
        logs = await self.call(
            "eth_getLogs",
            [{"address": asset, "fromBlock": hex(from_block), "toBlock": "latest", "topics": topics}],
        )
        return [str(log.get("transactionHash")) for log in logs if isinstance(log, dict)]

    async def transfers_in(self, transaction: str) -> list[Transfer] | None:
        """The ``Transfer`` logs of a successful ``transaction``; ``None`` if it is not mined or reverted."""
        receipt = await self.call("eth_getTransactionReceipt", [transaction])
        if not isinstance(receipt, dict) or receipt.get("status") != "0x1":
            return None
        found: list[Transfer] = []
        for log in receipt.get("logs") or []:
            topics = log.get("topics") or []
            if len(topics) == 3 and topics[0] == _TRANSFER:
                found.append(
                    Transfer(
                        to_checksum_address(log["address"]),
                        to_checksum_address("0x" + topics[1][-40:]),
                        to_checksum_address("0x" + topics[2][-40:]),
                        int(log.get("data") or "0x0", 16),
                    )
                )
        return found
