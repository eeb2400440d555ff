"""The one transaction a payer may send itself: `approve(Permit2, max)` on a token, so that Permit2 payments
in it need no allowance in each payment (a token without EIP-2612 cannot be paid by Permit2 otherwise).

Sent only when asked (``x402-pay approve-permit2``); the payer pays its gas. An allowance that is already the
maximum sends nothing.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Final

import httpx
from eth_account import Account

from ._chain import Chain, call_data
from ._errors import ChainError
from ._permit2_terms import PERMIT2_ADDRESS

__all__ = ["Approval", "approve_permit2"]

_MAX_UINT256: Final = 2**256 - 1
_POLL_S: Final = 0.2
# A wallet's usual margin over the node's estimate: the estimate is made against the latest block.
_GAS_MARGIN: Final = 1.2


@dataclass(frozen=True, slots=True)
class Approval:
    """What ``approve_permit2`` did.

    Attributes:
        owner: the approving account.
        network: the CAIP-2 network of the token.
        transaction: the hash of the approval sent, or None when Permit2 was already allowed the maximum.
    """

    owner: str
    network: str
    transaction: str | None


async def approve_permit2(
    rpc_url: str,
    private_key: str,
    token: str,
    *,
    http: httpx.AsyncClient | None = None,
    timeout_s: float = 60.0,
) -> Approval:
    """Approve Permit2 to move all of `token` of the key's account, on the chain of the node at `rpc_url`,
    and wait (up to `timeout_s`, as each request) for the transaction to be mined.

    Raises:
        ChainError: the node did not answer, refused or lost the transaction, it reverted, or it was not
            mined in time.
    """
    if http is None:
        async with httpx.AsyncClient() as own:
            return await approve_permit2(rpc_url, private_key, token, http=own, timeout_s=timeout_s)
    chain = await Chain.of_node(http, rpc_url, timeout_s=timeout_s)
    return await _approve(chain, private_key, token, receipt_timeout_s=timeout_s)


async def _approve(chain: Chain, private_key: str, token: str, *, receipt_timeout_s: float) -> Approval:
    owner = Account.from_key(private_key).address
    allowance = await chain.uint(
        token, "allowance(address,address)", ["address", "address"], [owner, PERMIT2_ADDRESS]
    )
    if allowance is None:
        raise ChainError(f"{token} on {chain.network} does not answer allowance(): is it an ERC-20?")
    if allowance == _MAX_UINT256:
        return Approval(owner, chain.network, None)
    data = (
        "0x"
        + call_data("approve(address,uint256)", ["address", "uint256"], [PERMIT2_ADDRESS, _MAX_UINT256]).hex()
    )
    call = {"from": owner, "to": token, "data": data}
    gas = int(str(await chain.request("eth_estimateGas", [call])), 16)
    nonce = int(str(await chain.request("eth_getTransactionCount", [owner, "pending"])), 16)
    transaction: dict[str, Any] = {
        "to": token,
        "data": data,
        "value": 0,
        "gas": int(gas * _GAS_MARGIN),
        "nonce": nonce,
        "chainId": chain.chain_id,
        **await _fees(chain),
    }
    raw = Account.sign_transaction(transaction, private_key).raw_transaction
    sent = str(await chain.request("eth_sendRawTransaction", ["0x" + raw.hex()]))
    receipt = await _receipt(chain, sent, receipt_timeout_s)
    if receipt.get("status") != "0x1":
        raise ChainError(f"the approval of Permit2 {sent} reverted on {chain.network}")
    return Approval(owner, chain.network, sent)


async def _fees(chain: Chain) -> dict[str, int]:
    """EIP-1559 fees where the chain has a base fee (twice it, plus the tip), else the legacy gas price."""
    block = await chain.request("eth_getBlockByNumber", ["latest", False])
    base = block.get("baseFeePerGas") if isinstance(block, dict) else None
    if base is None:
        return {"gasPrice": int(str(await chain.request("eth_gasPrice", [])), 16)}
    tip = int(str(await chain.request("eth_maxPriorityFeePerGas", [])), 16)
    return {"maxFeePerGas": 2 * int(str(base), 16) + tip, "maxPriorityFeePerGas": tip}


async def _receipt(chain: Chain, transaction: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        receipt = await chain.request("eth_getTransactionReceipt", [transaction])
        if isinstance(receipt, dict):
            return receipt
        if time.monotonic() >= deadline:
            raise ChainError(f"the approval of Permit2 {transaction} was not mined within {timeout_s} s")
        await asyncio.sleep(_POLL_S)
