"""The mined transaction that used an authorization to pay the payee, found from the chain's logs.

Anyone may submit a signed EIP-3009 authorization, or a signed `exact` Permit2 witness transfer (an `upto`
one only its witness's facilitator may send), and a facilitator that crashed after sending knows its own
transaction only from the chain. Each is judged from the logs of the block that holds it, never from a
receipt looked up by hash: a node that mines an identical transaction twice (ganache) answers that hash with
the copy that reverted, while the logs (which only a successful execution leaves) show the one that paid.

An EIP-3009 token logs the nonce it used (`AuthorizationUsed`). Permit2 logs nothing of a nonce it spends, so
a Permit2 settlement is a transaction whose calldata hands an x402 proxy this payer's permit of this nonce
and token (directly, or through Multicall3), in which the proxy logged its settlement and the token its
transfer to the payee of the amount. A proxy called by any other contract cannot be read from calldata: such
a use of the nonce is not counted as the payment (the payer may have paid something else with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._claims import Claim, ClaimKey
from ._nonce_state import is_permit2
from ._permit2 import EXACT_PERMIT2_PROXY, UPTO_PERMIT2_PROXY
from ._permit2_calls import PROXY_SETTLED_TOPICS, settled_permits
from ._rpc import RpcClient
from ._token import AUTHORIZATION_USED_TOPIC, TRANSFER_TOPIC, transfer_logs
from .wire import checksum_address

__all__ = [
    "ThirdPartySettlement",
    "address_topic",
    "claim_settlement",
    "find_settlement",
    "find_use",
    "paid_claim",
]

# How far back to look for the transaction that used an authorization.
_LOG_WINDOW_BLOCKS = 50_000


@dataclass(frozen=True, slots=True)
class ThirdPartySettlement:
    """A transaction (maybe not ours) that used the claim's authorization and paid the payee; `sender`
    is the account that sent it (EIP-55)."""

    tx_hash: str
    block_number: int
    block_hash: str
    sender: str


def address_topic(address: str) -> str:
    """An address as an indexed event topic (a 32-byte word)."""
    return "0x" + address[2:].lower().rjust(64, "0")


def paid_claim(claim: Claim, receipt: dict[str, Any]) -> bool:
    """Whether a successful transaction's receipt paid the claim's terms: a `Transfer` of its token from the
    payer to the payee of its amount, and for a Permit2 claim an x402 proxy's settlement event too."""
    paid = any(
        log.token == claim.moved_token
        and log.from_ == claim.payer
        and log.to == claim.pay_to
        and log.value == claim.amount
        for log in transfer_logs(receipt)
    )
    if not paid or not is_permit2(claim.asset):
        return paid
    return any(
        checksum_address(log["address"]) in (EXACT_PERMIT2_PROXY, UPTO_PERMIT2_PROXY)
        and (log.get("topics") or [None])[0] in PROXY_SETTLED_TOPICS
        for log in receipt.get("logs") or []
    )


async def claim_settlement(rpc: RpcClient, claim: Claim) -> ThirdPartySettlement | None:
    """`find_use` of `claim`'s authorization and terms."""
    return await find_use(rpc, claim.key, token=claim.moved_token, pay_to=claim.pay_to, amount=claim.amount)


async def find_use(
    rpc: RpcClient, key: ClaimKey, *, token: str, pay_to: str, amount: int
) -> ThirdPartySettlement | None:
    """The mined transaction that used the authorization of `key` (EIP-3009, or Permit2 when its asset is
    Permit2) and paid `pay_to` `amount` of `token`, if any."""
    if is_permit2(key.asset):
        return await _find_permit2(
            rpc, token=token, payer=key.payer, nonce=int(key.nonce, 16), pay_to=pay_to, amount=amount
        )
    return await find_settlement(
        rpc, asset=key.asset, payer=key.payer, nonce=key.nonce, pay_to=pay_to, amount=amount
    )


async def find_settlement(
    rpc: RpcClient, *, asset: str, payer: str, nonce: str, pay_to: str, amount: int
) -> ThirdPartySettlement | None:
    """The mined transaction that used `payer`'s EIP-3009 authorization `nonce` and paid `pay_to` `amount`.

    Its execution must have emitted the token's `AuthorizationUsed(payer, nonce)` and a `Transfer` of that
    token from `payer` to `pay_to` of `amount`; a use of the nonce that paid someone else, or another
    amount, is none.
    """
    head = int(await rpc.call("eth_blockNumber"), 16)
    payer_word = address_topic(payer)
    logs = await rpc.call(
        "eth_getLogs",
        {
            "address": asset,
            "fromBlock": hex(max(head - _LOG_WINDOW_BLOCKS, 0)),
            "toBlock": "latest",
            "topics": [AUTHORIZATION_USED_TOPIC, payer_word, nonce],
        },
    )
    for log in logs or []:
        if log.get("removed"):
            continue
        transfers = await rpc.call(
            "eth_getLogs",
            {
                "address": asset,
                "blockHash": log["blockHash"],
                "topics": [TRANSFER_TOPIC, payer_word, address_topic(pay_to)],
            },
        )
        if not any(
            t.get("transactionIndex") == log["transactionIndex"] and int(t.get("data") or "0x0", 16) == amount
            for t in transfers or []
        ):
            continue
        sent = await rpc.call(
            "eth_getTransactionByBlockHashAndIndex", log["blockHash"], log["transactionIndex"]
        )
        if sent is None:
            continue  # reorganised away since the logs were read
        return _found(log, sent)
    return None


async def _find_permit2(
    rpc: RpcClient, *, token: str, payer: str, nonce: int, pay_to: str, amount: int
) -> ThirdPartySettlement | None:
    """The mined transaction that settled `payer`'s Permit2 `nonce` through an x402 proxy, paying `pay_to`
    `amount` of `token` (see the module docstring)."""
    head = int(await rpc.call("eth_blockNumber"), 16)
    transfers = await rpc.call(
        "eth_getLogs",
        {
            "address": token,
            "fromBlock": hex(max(head - _LOG_WINDOW_BLOCKS, 0)),
            "toBlock": "latest",
            "topics": [TRANSFER_TOPIC, address_topic(payer), address_topic(pay_to)],
        },
    )
    for log in transfers or []:
        if log.get("removed") or int(log.get("data") or "0x0", 16) != amount:
            continue
        sent = await rpc.call(
            "eth_getTransactionByBlockHashAndIndex", log["blockHash"], log["transactionIndex"]
        )
        if sent is None or sent.get("to") is None:
            continue  # reorganised away since the logs were read, or a contract creation
        permits = settled_permits(checksum_address(sent["to"]), sent.get("input") or "0x")
        if not any(p.owner == payer and p.nonce == nonce and p.token == token for p in permits):
            continue
        settled = await rpc.call(
            "eth_getLogs",
            {
                "address": [EXACT_PERMIT2_PROXY, UPTO_PERMIT2_PROXY],
                "blockHash": log["blockHash"],
                "topics": [PROXY_SETTLED_TOPICS],
            },
        )
        if any(s.get("transactionIndex") == log["transactionIndex"] for s in settled or []):
            return _found(log, sent)
    return None


def _found(log: dict[str, str], sent: dict[str, str]) -> ThirdPartySettlement:
    return ThirdPartySettlement(
        tx_hash=log["transactionHash"],
        block_number=int(log["blockNumber"], 16),
        block_hash=log["blockHash"],
        sender=checksum_address(sent["from"]),
    )
