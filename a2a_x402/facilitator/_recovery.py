"""Finishing settlements that went astray: dropped from the pool, sent by someone else, or orphaned.

A settlement transaction can leave the node's pool without being mined (evicted, dropped, a node restart)
or be reorganised out of a block; while its authorization is unused and unexpired it can still land. The
same signed bytes are broadcast again; if the relayer nonce they carry was meanwhile taken, the transfer
is re-sent with a fresh nonce (from the same key when it is an `upto` settlement: the proxy takes it only
from the facilitator the payer named). An authorization can also be used by a transaction that is not ours
(anyone may submit a signed EIP-3009 authorization or `exact` Permit2 transfer): `_found` tells which, and
whether the payee was paid.
"""

from __future__ import annotations

import logging

from eth_account.typed_transactions.typed_transaction import TypedTransaction
from hexbytes import HexBytes

from ._claims import Claim, ClaimStore
from ._errors import ChainError
from ._found import ThirdPartySettlement, claim_settlement
from ._nonce_state import authorization_used
from ._permit2 import UPTO_PERMIT2_PROXY
from ._pool import RelayerPool
from ._relayer import BroadcastUncertainError
from ._rpc import RpcClient
from .wire import checksum_address

__all__ = ["Recovery"]

logger = logging.getLogger(__name__)


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
        # The same call again: to the token or the proxy, or to Multicall3 when it also deploys an ERC-6492
        # wallet; an `upto` one from the key that sent it, the witness's facilitator.
        to = checksum_address("0x" + bytes(sent_before["to"]).hex())
        try:
            sent = await self._relayer.send(
                to,
                "0x" + bytes(sent_before["data"]).hex(),
                int(sent_before["gas"]),
                claim_id=claim.id,
                sender=claim.relayer if to == UPTO_PERMIT2_PROXY else None,
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
