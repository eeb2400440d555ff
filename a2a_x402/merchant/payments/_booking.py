"""What the books and the billing webhooks are told about a payment: its booking, and its events."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import stamina
from sqlalchemy.ext.asyncio import AsyncConnection

from a2a_x402.facilitator import ChainError, RpcClient
from a2a_x402.facilitator.wire import PaymentRequirements, SettleResponse, payer_of, signer_of

from ..ledger import Along, Ledger, LedgerError, SettlementBooking
from ..webhooks import EventType
from ._ap2_books import round_ap2
from ._chain_proof import NotProvenError, prove_settlement
from ._metered import offered_maximum
from ._offer_table import Offer, OfferState
from ._offers import OfferStore
from ._signed import SignedPayment

__all__ = ["book_settlement", "record_paid", "settlement_event"]

logger = logging.getLogger(__name__)


async def book_settlement(
    ledger: Ledger,
    rpc: RpcClient,
    offer: Offer,
    payload: SignedPayment,
    requirements: PaymentRequirements,
    response: SettleResponse,
    *,
    along: Along | None = None,
    unproven: list[str] | None = None,
) -> bool:
    """Book a successful settlement for `offer`'s task; True when it is in the ledger (now or before).

    What is booked is what the chain shows, read through `rpc` (the merchant's node) by the transaction the
    facilitator named: any facilitator's answer will do, ours or another's, extras or none. A receipt that
    does not show the offered payment is not booked; it is logged (one WARNING line) and left to the
    reconciler, which compares the chain with the offers. `along` commits with the booking (the offer
    marked paid and booked). Booking never stops delivery: the payer paid. A settlement that cannot be
    booked now is logged naming the task and the transaction, and the reconciler books it later. What the
    chain shows instead of the offered payment is also appended to `unproven` (the reconciler's difference).
    A round paid with AP2 mandates is booked with their references (`round_ap2`).
    """
    try:
        paid = await prove_settlement(rpc, response.transaction, payload, requirements)
    except NotProvenError as exc:
        if unproven is not None:
            unproven.append(f"task {offer.task_id}: the settlement {exc}; not booked")
        logger.warning(
            "settlement of task %s not booked: the chain does not show it paid the offered terms: %s",
            offer.task_id,
            exc,
        )
        return False
    except ChainError as exc:
        logger.warning(
            "settlement of task %s in %s not booked now (the reconciler books it): %s",
            offer.task_id,
            response.transaction,
            exc,
        )
        return False
    try:
        booking = SettlementBooking(
            tenant=offer.tenant,
            task_id=offer.task_id,
            context_id=offer.context_id,
            payer=paid.payer,
            pay_to=paid.pay_to,
            asset=requirements.asset,
            network=requirements.network,
            chain_id=requirements.chain_id,
            amount=paid.amount,
            nonce=signer_of(payload).nonce,
            tx_hash=paid.tx_hash,
            block_number=paid.block_number,
            settled_at=datetime.now(UTC),
            maximum=offered_maximum(offer),
        )
        # A ledger error is a verdict on the booking itself; anything else (the database) may pass.
        async for attempt in stamina.retry_context(
            on=lambda exc: not isinstance(exc, LedgerError), attempts=5, timeout=10.0
        ):
            with attempt:
                await ledger.book_settlement(
                    booking, along=along, ap2_of=round_ap2(offer.task_id, offer.round, offer.payload_hash)
                )
    except Exception:  # noqa: BLE001 - the payer paid: deliver even when the books cannot be written now
        logger.exception(
            "settlement of task %s in %s could not be booked", offer.task_id, response.transaction
        )
        return False
    return True


async def record_paid(
    ledger: Ledger,
    rpc: RpcClient,
    offers: OfferStore,
    offer: Offer,
    payload: SignedPayment,
    requirements: PaymentRequirements,
    response: SettleResponse,
    receipts: list[dict[str, Any]],
) -> None:
    """Book a successful settlement and record `offer` paid with `receipts`, in one transaction.

    A settlement that cannot be booked now still leaves the offer paid, marked unbooked: the reconciler
    books it later (`PaymentRecovery.book_unbooked`). The task is told afterwards; if the process stops
    before it is, recovery tells it from the offer (`PaymentRecovery.tell_untold`). A metered payment
    settled for 0 moved nothing (no transaction): the offer is paid with nothing to book.
    """
    if requirements.amount == 0:
        await offers.advance(offer.task_id, OfferState.PAID, receipts=receipts, booked_at=datetime.now(UTC))
        return

    async def paid_and_booked(connection: AsyncConnection) -> None:
        await offers.advance_in(
            connection, offer.task_id, OfferState.PAID, receipts=receipts, booked_at=datetime.now(UTC)
        )

    if not await book_settlement(ledger, rpc, offer, payload, requirements, response, along=paid_and_booked):
        await offers.advance(offer.task_id, OfferState.PAID, receipts=receipts)


def settlement_event(
    kind: EventType,
    offer: Offer,
    requirements: PaymentRequirements,
    payload: SignedPayment,
    response: SettleResponse,
) -> tuple[EventType, dict[str, Any]]:
    """A `settlement.pending` or `settlement.failed` webhook event (type and data) for `offer`'s payment.

    A metered payment's event carries its `maximum` (what the payer signed for) beside the `amount` being
    settled (`requirements.amount`, its usage). `settlement.completed`, `.finalized` and `.reversed` come
    from the ledger, with the entry they report.
    """
    data: dict[str, Any] = {
        "taskId": offer.task_id,
        "contextId": offer.context_id,
        "payer": payer_of(payload),
        "payTo": requirements.pay_to,
        "asset": requirements.asset,
        "network": requirements.network,
        "amount": str(requirements.amount),
        "transaction": response.transaction or None,
        "occurredAt": datetime.now(UTC).isoformat(),
    }
    maximum = offered_maximum(offer)
    if maximum is not None:
        data["maximum"] = str(maximum)
    if kind is EventType.SETTLEMENT_FAILED:
        data["reason"] = response.error_reason or "transaction_failed"
    return kind, data
