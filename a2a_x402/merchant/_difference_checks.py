"""The reconciler's side of the differences' lifecycle: storing what a pass saw, resolving by the chain
what it no longer shows (with the reason), and recognising a restarted chain by its genesis block.

A difference a pass did not see again is not resolved for that alone: a later pass reads only the newest
blocks, so a payment further back is simply not read again. It is resolved when a check says why: the
ledger has the payment now, its transaction left the chain, the chain answered again, recovery no longer
finds the task's settlement unbooked. Any other stays open until an operator closes it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a_x402.facilitator import RpcClient

from ._chain_scan import ChainPayment
from .differences import DifferenceNotOpenError, DifferenceState, DifferenceStore, Sighting
from .differences import _kinds as kinds
from .ledger import Ledger
from .payments import exception_line

__all__ = ["Restart", "chain_restart", "payment_facts", "resolution", "store_differences"]

logger = logging.getLogger(__name__)

StillOpen = Callable[[str, dict[str, Any]], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Restart:
    """The last restart of the chain seen (`since`, None if never) and, when this pass saw it, its text."""

    since: datetime | None
    text: str | None = None
    genesis: str = ""


def payment_facts(payment: ChainPayment, *, asset: str, chain_id: int) -> dict[str, Any]:
    """What a later check, or a booking, needs of a payment seen on chain."""
    return {
        "payer": payment.payer,
        "nonce": payment.nonce,
        "pay_to": payment.pay_to,
        "amount": payment.amount,
        "tx_hash": payment.tx_hash,
        "block_number": payment.block_number,
        "asset": asset,
        "chain_id": chain_id,
    }


async def chain_restart(store: DifferenceStore, rpc: RpcClient, chain_id: int) -> Restart:
    """Compare the chain's genesis block with the one stored; on a change, store the new one, resolve the
    open differences about the old chain's history (one log line for all) and say so once."""
    block = await rpc.call("eth_getBlockByNumber", "0x0", False)
    genesis = str(block["hash"]).lower()
    known = await store.genesis(chain_id)
    if known is None:
        await store.set_genesis(chain_id, genesis, restarted_at=None)
        return Restart(None)
    old, since = known
    if old == genesis:
        return Restart(since)
    now = datetime.now(UTC)
    await store.set_genesis(chain_id, genesis, restarted_at=now)
    closed = await store.resolve_all(kinds.CHAIN_KINDS, note="the chain restarted", by="chain", now=now)
    text = (
        f"the chain restarted: genesis block {genesis} (was {old}); {closed} open differences about the "
        f"old chain closed; bookings before {now.isoformat(timespec='seconds')} are not on it"
    )
    return Restart(now, text, genesis)


async def resolution(rpc: RpcClient, ledger: Ledger, kind: str, facts: dict[str, Any]) -> str | None:
    """Why the stored difference of `kind` with `facts` is resolved by the chain now, or None."""
    if kind in kinds.PAYMENT_KINDS:
        if kind in kinds.LEDGER_KINDS and await ledger.has_authorization(
            int(facts["chain_id"]), str(facts["asset"]), str(facts["payer"]), str(facts["nonce"])
        ):
            return "the transfer is in the ledger now"
        if not await _succeeded(rpc, str(facts["tx_hash"])):
            return "reorged out: its transaction is no longer on the chain"
        return None
    if kind == kinds.REORGED_OUT and "tx_hash" in facts and await _succeeded(rpc, str(facts["tx_hash"])):
        return "its transaction is on the chain again"
    return None


async def _succeeded(rpc: RpcClient, tx_hash: str) -> bool:
    receipt = await rpc.call("eth_getTransactionReceipt", tx_hash)
    return receipt is not None and int(receipt.get("status", "0x0"), 16) == 1


async def store_differences(store: DifferenceStore, differences: list[Any], still_open: StillOpen) -> None:
    """Store the differences a pass saw (`Difference`s) and resolve the open ones it did not see whose
    resolution a check finds; a check that fails leaves its difference open for the next pass."""
    await store.sighted(
        Sighting(kind=d.kind, key=d.key, detail=d.text, tenant=d.tenant, pay_to=d.pay_to, facts=d.facts)
        for d in differences
    )
    seen = {(d.kind, d.key) for d in differences}
    for stored in await store.listed(limit=1_000):
        if (stored.kind, stored.key) in seen:
            continue
        reason: str | None = None
        if stored.kind == kinds.CHAIN_UNAVAILABLE:
            reason = "the chain answered again"
        elif stored.kind == kinds.RECOVERY_UNPROVEN:
            reason = "its task's settlement no longer awaits booking"
        else:
            try:
                reason = await still_open(stored.kind, stored.facts)
            except Exception as exc:  # noqa: BLE001 - checked again by the next pass
                logger.warning("difference %d: check postponed: %s", stored.id, exception_line(exc))
        if reason is not None:
            try:
                await store.close(stored.id, DifferenceState.RESOLVED, note=reason, by="chain")
            except DifferenceNotOpenError:
                pass  # an operator (or another replica) closed it meanwhile
