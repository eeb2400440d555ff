"""What the chain says a settlement paid: the merchant's own reading of the receipt a facilitator named.

A facilitator answers a settlement with a transaction hash and, in the x402 fields, nothing else the books
need: ours adds the block number as an extension, the x402 SDKs' and hosted facilitators do not. So the
merchant never books from the answer's extras. It reads the transaction's receipt through its own node and
books only the payment the logs prove: a successful transaction whose `AuthorizationUsed` log names the
payer and the signed nonce, followed by the token's `Transfer` of the offered amount from the payer to the
offered payTo (`pair_payments`, as the reconciler's chain scan reads them).

Permit2 logs no nonce: a Permit2 payment is proven by the transaction's calldata, an x402 proxy's settlement
of the payer's permit of that nonce and token (`facilitator.settled_permits`), and the token's `Transfer`
of the offered amount from the payer to the offered payTo in its receipt (`pair_permit2_payments`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from eth_utils.address import to_checksum_address

from a2a_x402.facilitator import ChainError, RpcClient, settled_permits
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements, signer_of

from .._chain_scan import ChainPayment, pair_payments, pair_permit2_payments
from ._signed import SignedPayment

__all__ = ["NotProvenError", "prove_settlement"]

# A receipt the facilitator's node has and ours does not yet (another provider, a node a block behind) is
# asked for again, this often, for this long; then the reconciler's chain scan takes over.
_UNSEEN_POLL_S = 0.25
_UNSEEN_WAIT_S = 5.0


class NotProvenError(Exception):
    """The chain does not (or not yet) show that `tx_hash` paid the offered terms; `what` is what it shows."""

    def __init__(self, tx_hash: str, what: str):
        super().__init__(f"{tx_hash} {what}")
        self.tx_hash = tx_hash
        self.what = what


async def prove_settlement(
    rpc: RpcClient,
    tx_hash: str,
    payload: SignedPayment,
    requirements: PaymentRequirements,
    *,
    unseen_wait_s: float = _UNSEEN_WAIT_S,
) -> ChainPayment:
    """The payment `tx_hash` made of `payload`'s authorization on `requirements`' terms, read from the chain.

    Raises:
        NotProvenError: the transaction is unknown (after `unseen_wait_s`), reverted, or moved something
            else (another payer, nonce, payee, amount or token).
        facilitator.ChainError: the node could not be read.
    """
    if not _is_tx_hash(tx_hash):
        raise NotProvenError(repr(tx_hash)[:80], "is not a transaction hash")
    deadline = time.monotonic() + unseen_wait_s
    receipt = await rpc.call("eth_getTransactionReceipt", tx_hash)
    while receipt is None and time.monotonic() < deadline:
        await asyncio.sleep(_UNSEEN_POLL_S)
        receipt = await rpc.call("eth_getTransactionReceipt", tx_hash)
    if receipt is None:
        raise NotProvenError(tx_hash, "is not on the merchant's node")
    if not isinstance(receipt, dict) or receipt.get("status") != "0x1":
        raise NotProvenError(tx_hash, "did not succeed on chain")
    pay_to = to_checksum_address(requirements.pay_to)
    signer = signer_of(payload)
    payer, nonce = to_checksum_address(signer.payer), signer.nonce
    try:
        if isinstance(payload, PaymentPayload):
            paid = pair_payments(receipt.get("logs") or [], requirements.asset, {pay_to})
        else:
            paid = await _permit2_payments(rpc, tx_hash, receipt, requirements.asset, pay_to)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ChainError(f"the receipt of {tx_hash} is malformed: {exc}") from exc
    for payment in paid:
        if payment.payer == payer and payment.nonce == nonce:
            if payment.amount != requirements.amount:
                raise NotProvenError(tx_hash, f"paid {payment.amount}, not the offered {requirements.amount}")
            return payment
    raise NotProvenError(
        tx_hash, f"shows no transfer of {requirements.asset} from {payer} to {pay_to} using nonce {nonce}"
    )


async def _permit2_payments(
    rpc: RpcClient, tx_hash: str, receipt: dict[str, Any], asset: str, pay_to: str
) -> list[ChainPayment]:
    """The payments of `asset` to `pay_to` in a successful transaction by the permits it settled through
    an x402 proxy, as the reconciler's chain scan pairs them; none when it settled no permit."""
    sent = await rpc.call("eth_getTransactionByHash", tx_hash)
    if not isinstance(sent, dict) or not sent.get("to"):
        return []
    permits = settled_permits(to_checksum_address(sent["to"]), sent.get("input") or "0x")
    return pair_permit2_payments(receipt.get("logs") or [], permits, asset, {pay_to})


def _is_tx_hash(value: str) -> bool:
    return len(value) == 66 and value[:2] == "0x" and all(c in "0123456789abcdefABCDEF" for c in value[2:])
