"""``exact`` by Permit2 (spec §7.8, §8.10): a task paid with a Permit2 witness transfer, and the chain after.

The checks apply where the terms of the card's request offer an ``exact`` entry with
``extra.assetTransferMethod: "permit2"``; elsewhere they are skipped, saying so. A Permit2 payment logs no
``AuthorizationUsed``, so its settlement is read from the transaction its receipt names (what it moved
from the payer) and from Permit2's nonce bitmap (the payment's nonce is spent). ``pay_permit2`` and
``expect_permit2_settled`` serve the metered checks too.
"""

from __future__ import annotations

from typing import Any

from ._context import Probe, fail
from ._flows import completed
from ._messages import extension_message, user_message
from ._permit2 import permit2_allowance, sign_permit2
from ._reply import Reply
from ._signer import Signed, payload_v2
from ._steps import Offer, offer_from, outcome_of
from ._wire import Wire

__all__ = ["PERMIT2_CHECKS", "expect_permit2_settled", "pay_permit2", "permit2_task"]

JSON = Any
PERMIT2_CHECKS = ("permit2.completes", "permit2.settled-on-chain")


async def pay_permit2(probe: Probe, wire: Wire, offer: Offer) -> tuple[Signed, Reply]:
    """Sign a Permit2 witness transfer for ``offer`` (for ``upto``: its maximum), see that Permit2 may move
    it, send it, and return it with the answer once the task left TASK_STATE_WORKING.

    Raises:
        CheckFailed: the payment got no task.
        NotApplicable: the payer's allowance for Permit2 is missing and the kit may not approve it.
    """
    interface, run = wire.interface, probe.run
    signed = sign_permit2(
        run.signer, offer.entry, tenant=interface.tenant, network=offer.network, amount=offer.amount
    )
    await permit2_allowance(probe, signed.asset, signed.value)
    payload = payload_v2(offer.entry, signed)
    sent = await wire.send(extension_message(interface, offer.task_id, "payment-submitted", payload=payload))
    paid = await outcome_of(probe, wire, sent)
    if paid.error is not None or paid.task is None:
        raise fail("the payment got no task", paid.exchange)
    return signed, paid


async def expect_permit2_settled(
    probe: Probe, signed: Signed, transaction: str, amount: int, reply: Reply
) -> None:
    """``transaction`` is mined, moved exactly ``amount`` of the asset from the payer (to its payTo only),
    and the payment's Permit2 nonce is spent.

    Raises:
        CheckFailed: it is not mined, moved another amount or to another address, or left the nonce unspent.
    """
    chain = probe.run.chain
    transfers = await chain.transfers_in(transaction)
    if transfers is None:
        raise fail(
            f"the receipt's transaction {transaction} is not a successful mined transaction", reply.exchange
        )
    moved = [
        (t.recipient, t.value) for t in transfers if t.asset == signed.asset and t.sender == signed.payer
    ]
    if moved != [(signed.pay_to, amount)]:
        raise fail(
            f"{transaction} moved {moved} from the payer, not exactly {amount} to {signed.pay_to}",
            reply.exchange,
        )
    if not await chain.nonce_used(signed.nonce_at, signed.payer, signed.nonce):
        raise fail(f"the payment's Permit2 nonce is unspent: {transaction} did not settle it", reply.exchange)


async def permit2_task(probe: Probe, wire: Wire) -> Reply | None:
    """An ``exact`` entry by Permit2 paid: the task completes, and the chain moved the price once.

    Returns the answer to the priced request when it offered no such entry (the checks were skipped), so
    that another kind's checks pay that task rather than ask for one more.
    """
    interface = wire.interface
    unpaid: Reply | None = None
    async with probe.check("permit2.completes") as shown:
        terms = await wire.send(user_message(interface, probe.run.discovery.request_text))
        shown.append(terms.exchange)
        unpaid = terms
        offer = offer_from(probe, terms, interface.tenant, "permit2")
        unpaid = None
        signed, paid = await pay_permit2(probe, wire, offer)
        shown[:] = [paid.exchange]
        receipt = completed(paid.task, paid)
    if probe.failed or probe.skip_rest("permit2.completes", PERMIT2_CHECKS[1:]):
        return unpaid
    async with probe.check("permit2.settled-on-chain"):
        if receipt.get("amount", str(signed.value)) != str(signed.value):
            raise fail(
                f"the receipt's amount is {receipt.get('amount')!r}, not the price {signed.value}",
                paid.exchange,
            )
        await expect_permit2_settled(probe, signed, str(receipt.get("transaction")), signed.value, paid)
    return None
