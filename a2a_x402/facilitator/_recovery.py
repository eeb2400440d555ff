"""Finishing settlements that went astray: dropped from the pool, sent by someone else, or orphaned.

A settlement transaction can leave the node's pool without being mined (evicted, dropped, a node restart)
or be reorganised out of a block; while its authorization is unused and unexpired it can still land. The
same signed bytes are broadcast again; if the relayer nonce they carry was meanwhile taken, the transfer
is re-sent with a fresh nonce. An authorization can also be used by a transaction that is not ours (anyone
may submit a signed EIP-3009 authorization): the `AuthorizationUsed` log tells which, and its `Transfer`
log whether the payee was paid.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from eth_account.typed_transactions.typed_transaction import TypedTransaction
from hexbytes import HexBytes

from ._claims import Claim, ClaimStore
from ._errors import ChainError
from ._pool import RelayerPool
from ._relayer import BroadcastUncertainError
from ._rpc import RpcClient
from ._token import AUTHORIZATION_USED_TOPIC, TRANSFER_TOPIC, decode_bool, encode_authorization_state
from .wire import checksum_address

__all__ = ["Recovery", "ThirdPartySettlement", "authorization_used", "find_settlement"]

logger = logging.getLogger(__name__)

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


async def authorization_used(
    rpc: RpcClient, asset: str, payer: str, nonce: str, block: str = "latest"
) -> bool:
    """Whether the EIP-3009 token at `asset` reports `payer`'s authorization `nonce` as used or cancelled."""
    call = {"to": asset, "data": encode_authorization_state(payer, bytes.fromhex(nonce[2:]))}
    return decode_bool(await rpc.call("eth_call", call, block))


async def claim_settlement(rpc: RpcClient, claim: Claim) -> ThirdPartySettlement | None:
    """`find_settlement` of `claim`'s authorization and terms."""
    return await find_settlement(
        rpc, asset=claim.asset, payer=claim.payer, nonce=claim.nonce, pay_to=claim.pay_to, amount=claim.amount
    )


async def find_settlement(
    rpc: RpcClient, *, asset: str, payer: str, nonce: str, pay_to: str, amount: int
) -> ThirdPartySettlement | None:
    """The mined transaction that used `payer`'s authorization `nonce` and paid `pay_to` `amount`, if any.

    Its execution must have emitted the token's `AuthorizationUsed(payer, nonce)` and a `Transfer` of that
    token from `payer` to `pay_to` of `amount`; a use of the nonce that paid someone else, or another
    amount, is none. It is judged from the logs of the block that holds it, never from a receipt looked up
    by hash: a node that mines an identical transaction twice (ganache) answers that hash with the copy
    that reverted, while the logs (which only a successful execution leaves) show the one that paid.
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
        return ThirdPartySettlement(
            tx_hash=log["transactionHash"],
            block_number=int(log["blockNumber"], 16),
            block_hash=log["blockHash"],
            sender=checksum_address(sent["from"]),
        )
    return None


def address_topic(address: str) -> str:
    """An address as an indexed event topic (a 32-byte word)."""
    return "0x" + address[2:].lower().rjust(64, "0")


class Recovery:
    """Chain-side repair of one claim at a time; every method is safe to repeat."""

    def __init__(self, rpc: RpcClient, claims: ClaimStore, relayer: RelayerPool):
        self._rpc = rpc
        self._claims = claims
        self._relayer = relayer

    async def revive(self, claim: Claim, tx_hash: str) -> str | ThirdPartySettlement:
        """Make sure the claim's transaction is in the pool or mined; return the hash to wait for.

        Nothing is sent while the node still knows the transaction, or once the authorization is used; if
        another transaction used it and paid the payee, that settlement is returned instead.
        """
        if await self._rpc.call("eth_getTransactionByHash", tx_hash) is not None:
            return tx_hash
        if await self.authorization_used(claim):
            return await self.settlement_of(claim) or tx_hash
        if claim.raw_tx and await self._relayer.rebroadcast(claim.raw_tx):
            logger.info("claim %s: %s left the pool; broadcast it again", claim.id, tx_hash)
            return tx_hash
        if claim.raw_tx is None:
            return tx_hash
        sent_before = TypedTransaction.from_bytes(HexBytes(claim.raw_tx)).as_dict()
        # The same call again: to the token, or to Multicall3 when it also deploys an ERC-6492 wallet.
        try:
            sent = await self._relayer.send(
                checksum_address("0x" + bytes(sent_before["to"]).hex()),
                "0x" + bytes(sent_before["data"]).hex(),
                int(sent_before["gas"]),
                claim_id=claim.id,
            )
        except BroadcastUncertainError as exc:
            # Maybe taken (a slow node, a lost answer): the claim waits for it like any it sent.
            sent = exc.sent
        logger.info("claim %s: the nonce of %s was taken; re-sent as %s", claim.id, tx_hash, sent.tx_hash)
        await self._claims.mark_broadcast(
            claim.id, relayer=sent.sender, relayer_nonce=sent.nonce, tx_hash=sent.tx_hash, raw_tx=sent.raw
        )
        return sent.tx_hash

    async def authorization_used(self, claim: Claim, block: str = "pending") -> bool:
        """Whether the token reports the claim's authorization as used (or cancelled)."""
        return await authorization_used(self._rpc, claim.asset, claim.payer, claim.nonce, block)

    async def settlement_of(self, claim: Claim) -> ThirdPartySettlement | None:
        """The mined transaction that used the claim's authorization and paid the payee, if any."""
        return await claim_settlement(self._rpc, claim)

    async def safely(self, claim: Claim, tx_hash: str) -> str | ThirdPartySettlement:
        """`revive`, logging instead of raising when the chain cannot be reached (a later pass retries)."""
        try:
            return await self.revive(claim, tx_hash)
        except ChainError as exc:
            logger.warning("claim %s: could not check %s: %s", claim.id, tx_hash, exc)
            return tx_hash
