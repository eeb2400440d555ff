"""Reading payments to the tenants' payTo addresses from the chain, in bounded ranges.

An EIP-3009 payment is a token `Transfer` to a payTo from the authorizer of the `AuthorizationUsed` log
the token emitted just before it in the same transaction (both come from one `transferWithAuthorization`).
A Permit2 payment logs no nonce: it is a `Transfer` to a payTo from the owner of a permit that the
transaction's calldata hands an x402 Permit2 proxy to settle (`facilitator.settled_permits`), keyed by
that permit's nonce as the ledger keys it (`p2…`). A transfer to a payTo with neither is a plain transfer,
not a payment, and is not reported; neither is a transfer batched after someone else's authorization, nor
one after an `AuthorizationUsed` log another contract emitted.

Only the transfers to the payTos are read by log filter; the authorizations come from the receipts of
those transfers' transactions, the permits from the transactions sent to a proxy (or Multicall3). The
token's `AuthorizationUsed` logs are never read unfiltered: on a busy token they are most of its logs, and
providers cap the size of one `eth_getLogs` answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from typing import Any

from eth_utils.address import to_checksum_address

from a2a_x402.facilitator import (
    AUTHORIZATION_USED_TOPIC,
    PERMIT_SETTLING_TARGETS,
    TRANSFER_TOPIC,
    RpcCall,
    RpcClient,
    RpcError,
    SettledPermit,
    settled_permits,
)
from a2a_x402.facilitator.wire import permit2_nonce_key

__all__ = ["ChainPayment", "pair_payments", "pair_permit2_payments", "payments_to"]

# Receipts (or transactions) asked for in one JSON-RPC batch (providers cap the number of calls in one).
_CALLS_PER_BATCH = 100


@dataclass(frozen=True, slots=True)
class ChainPayment:
    """An authorization (EIP-3009) or permit (Permit2) used on chain, and the transfer to a payTo it paid;
    `nonce` is its nonce's key as the ledger keys it (`facilitator.wire.PaymentSigner`)."""

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
    """Every EIP-3009 or Permit2 payment of `asset` to one of `pay_tos` mined in [from_block, to_block].

    The range is read `batch_blocks` at a time (providers cap the span of one `eth_getLogs`): the
    transfers to the payTos, then, in batches, the receipts of their transactions and the transactions
    sent to a Permit2 proxy (or Multicall3).
    """
    asset = to_checksum_address(asset)
    targets = {to_checksum_address(address) for address in pay_tos}
    found: list[ChainPayment] = []
    if not targets:
        return found
    padded = [_padded(address) for address in sorted(targets)]
    for start in range(from_block, to_block + 1, batch_blocks):
        end = min(start + batch_blocks - 1, to_block)
        span = {"address": asset, "fromBlock": hex(start), "toBlock": hex(end)}
        transfers = await rpc.call("eth_getLogs", {**span, "topics": [TRANSFER_TOPIC, None, padded]})
        tx_hashes = sorted({log["transactionHash"].lower() for log in transfers if not log.get("removed")})
        receipts = await _batched(rpc, "eth_getTransactionReceipt", tx_hashes)
        permits = await _permits(rpc, receipts)
        for receipt in receipts:
            found += pair_payments(receipt["logs"], asset, targets)
            settled = permits.get(receipt["transactionHash"].lower())
            if settled:
                found += pair_permit2_payments(receipt["logs"], settled, asset, targets)
    return sorted(found, key=lambda p: (p.block_number, p.tx_hash))


async def _permits(rpc: RpcClient, receipts: Sequence[dict[str, Any]]) -> dict[str, list[SettledPermit]]:
    """The permits each successful transaction among `receipts` sent to a proxy (or Multicall3) settled,
    by transaction hash; the others' calldata is not read."""
    hashes = [
        receipt["transactionHash"].lower()
        for receipt in receipts
        if receipt.get("status") == "0x1"
        and receipt.get("to")
        and to_checksum_address(receipt["to"]) in PERMIT_SETTLING_TARGETS
    ]
    return {
        sent["hash"].lower(): settled_permits(to_checksum_address(sent["to"]), sent.get("input") or "0x")
        for sent in await _batched(rpc, "eth_getTransactionByHash", hashes)
    }


async def _batched(rpc: RpcClient, method: str, tx_hashes: Sequence[str]) -> list[dict[str, Any]]:
    """`method`'s answer for each of `tx_hashes` still on the chain (one that left it since its logs were
    read is skipped: the next pass reads its range again)."""
    answers: list[dict[str, Any]] = []
    for start in range(0, len(tx_hashes), _CALLS_PER_BATCH):
        chunk = tx_hashes[start : start + _CALLS_PER_BATCH]
        for result in await rpc.batch([RpcCall(method, [tx_hash]) for tx_hash in chunk]):
            if isinstance(result, RpcError):
                raise result
            if result is not None:
                answers.append(result)
    return answers


def pair_payments(logs: Sequence[dict[str, Any]], asset: str, pay_tos: Set[str]) -> list[ChainPayment]:
    """The payments to one of `pay_tos` (checksummed) among the logs of one transaction's receipt.

    Each `Transfer` of `asset` consumes the `AuthorizationUsed` log `asset` emitted just before it, and
    is a payment only if its sender is that authorizer.
    """
    asset = to_checksum_address(asset)
    payments: list[ChainPayment] = []
    authorization: tuple[str, str] | None = None
    own = [log for log in logs if not log.get("removed") and to_checksum_address(log["address"]) == asset]
    for log in sorted(own, key=lambda item: int(item["logIndex"], 16)):
        topics = [topic.lower() for topic in log["topics"]]
        if topics and topics[0] == AUTHORIZATION_USED_TOPIC and len(topics) == 3:
            authorization = (_topic_address(topics[1]), topics[2])
        elif topics and topics[0] == TRANSFER_TOPIC and len(topics) == 3:
            sender, pay_to = _topic_address(topics[1]), _topic_address(topics[2])
            if authorization is not None and authorization[0] == sender and pay_to in pay_tos:
                payments.append(
                    ChainPayment(
                        payer=sender,
                        nonce=authorization[1],
                        pay_to=pay_to,
                        amount=int(log["data"], 16),
                        tx_hash=log["transactionHash"].lower(),
                        block_number=int(log["blockNumber"], 16),
                    )
                )
            authorization = None
    return payments


def pair_permit2_payments(
    logs: Sequence[dict[str, Any]], permits: Sequence[SettledPermit], asset: str, pay_tos: Set[str]
) -> list[ChainPayment]:
    """The payments to one of `pay_tos` (checksummed) among the logs of one transaction's receipt whose
    calldata settled `permits` (in call order).

    Each `Transfer` of `asset` from a permit's owner consumes that owner's next permit of `asset` (a
    proxy moves the tokens of the permit it settles, and Multicall3 makes its calls in order), and is a
    payment if it went to a payTo.
    """
    asset = to_checksum_address(asset)
    unspent = [permit for permit in permits if permit.token == asset]
    payments: list[ChainPayment] = []
    own = [log for log in logs if not log.get("removed") and to_checksum_address(log["address"]) == asset]
    for log in sorted(own, key=lambda item: int(item["logIndex"], 16)):
        topics = [topic.lower() for topic in log["topics"]]
        if len(topics) != 3 or topics[0] != TRANSFER_TOPIC:
            continue
        sender, pay_to = _topic_address(topics[1]), _topic_address(topics[2])
        permit = next((permit for permit in unspent if permit.owner == sender), None)
        if permit is None:
            continue
        unspent.remove(permit)
        if pay_to in pay_tos:
            payments.append(
                ChainPayment(
                    payer=sender,
                    nonce=permit2_nonce_key(permit.nonce),
                    pay_to=pay_to,
                    amount=int(log["data"], 16),
                    tx_hash=log["transactionHash"].lower(),
                    block_number=int(log["blockNumber"], 16),
                )
            )
    return payments
