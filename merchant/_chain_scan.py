"""Reading EIP-3009 payments to the tenants' payTo addresses from the chain's logs, in bounded ranges.

A payment is a token `Transfer` to a payTo preceded, in the same transaction, by the `AuthorizationUsed`
log of the authorization it consumed (the token emits both from `transferWithAuthorization`). A transfer
to a payTo without one is a plain transfer, not a payment, and is not reported.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from facilitator import RpcClient

__all__ = ["ChainPayment", "payments_to"]

_TRANSFER_TOPIC = "0x" + keccak(text="Transfer(address,address,uint256)").hex()
_AUTHORIZATION_USED_TOPIC = "0x" + keccak(text="AuthorizationUsed(address,bytes32)").hex()


@dataclass(frozen=True, slots=True)
class ChainPayment:
    """An authorization used on chain, and the transfer to a payTo it paid."""

    payer: str
    nonce: str
    pay_to: str
    amount: int
    tx_hash: str
    block_number: int


def _topic_address(topic: str) -> str:
    return to_checksum_address("0x" + topic[-40:])


def _padded(address: str) -> str:
    return "0x" + address[2:].lower().rjust(64, "0")


async def payments_to(
    rpc: RpcClient,
    asset: str,
    pay_tos: Iterable[str],
    *,
    from_block: int,
    to_block: int,
    batch_blocks: int,
) -> list[ChainPayment]:
    """Every EIP-3009 payment of `asset` to one of `pay_tos` mined in [from_block, to_block].

    The range is read `batch_blocks` at a time (providers cap the span of one `eth_getLogs`), two queries
    per batch: the transfers to the payTos and the token's `AuthorizationUsed` logs.
    """
    padded = [_padded(address) for address in pay_tos]
    found: list[ChainPayment] = []
    if not padded:
        return found
    for start in range(from_block, to_block + 1, batch_blocks):
        end = min(start + batch_blocks - 1, to_block)
        span = {"address": asset, "fromBlock": hex(start), "toBlock": hex(end)}
        transfers = await rpc.call("eth_getLogs", {**span, "topics": [_TRANSFER_TOPIC, None, padded]})
        if not transfers:
            continue
        used = await rpc.call("eth_getLogs", {**span, "topics": [_AUTHORIZATION_USED_TOPIC]})
        found += _pair(transfers, used)
    return found


def _pair(transfers: Sequence[dict[str, Any]], used: Sequence[dict[str, Any]]) -> list[ChainPayment]:
    """Each transfer paired with the authorization used just before it in its transaction."""
    by_tx: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for log in [*transfers, *used]:
        if not log.get("removed"):
            by_tx[log["transactionHash"].lower()].append(log)
    payments: list[ChainPayment] = []
    for tx_hash, logs in by_tx.items():
        authorization: tuple[str, str] | None = None
        for log in sorted(logs, key=lambda item: int(item["logIndex"], 16)):
            topics = log["topics"]
            if topics[0] == _AUTHORIZATION_USED_TOPIC:
                authorization = (_topic_address(topics[1]), topics[2].lower())
            elif authorization is not None:
                payments.append(
                    ChainPayment(
                        payer=authorization[0],
                        nonce=authorization[1],
                        pay_to=_topic_address(topics[2]),
                        amount=int(log["data"], 16),
                        tx_hash=tx_hash,
                        block_number=int(log["blockNumber"], 16),
                    )
                )
                authorization = None
    return sorted(payments, key=lambda p: (p.block_number, p.tx_hash))
