"""Booking a settled payment in the tenant's ledger."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import stamina

from facilitator.wire import PaymentPayload, PaymentRequirements, SettleResponse

from ..ledger import Ledger, LedgerError, SettlementBooking
from ._offers import Offer

__all__ = ["book_settlement"]

logger = logging.getLogger(__name__)


async def book_settlement(
    ledger: Ledger,
    offer: Offer,
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    response: SettleResponse,
) -> bool:
    """Book a successful settlement for `offer`'s task; True when it is in the ledger (now or before).

    Booking never stops delivery: the payer paid. A settlement that cannot be booked now is logged as an
    error naming the task and the transaction, and the reconciler books it later from the offer.
    """
    authorization = payload.payload.authorization
    settlement = (response.extensions or {}).get("settlement") or {}
    block = settlement.get("blockNumber")
    if not isinstance(block, int):
        logger.error(
            "settlement of task %s in %s not booked: the facilitator reported no block number",
            offer.task_id,
            response.transaction,
        )
        return False
    try:
        booking = SettlementBooking(
            tenant=offer.tenant,
            task_id=offer.task_id,
            context_id=offer.context_id,
            payer=authorization.from_address,
            pay_to=requirements.pay_to,
            asset=requirements.asset,
            network=requirements.network,
            chain_id=requirements.chain_id,
            amount=requirements.amount,
            nonce=authorization.nonce,
            tx_hash=response.transaction,
            block_number=block,
            settled_at=datetime.now(UTC),
        )
        # A ledger error is a verdict on the booking itself; anything else (the database) may pass.
        async for attempt in stamina.retry_context(
            on=lambda exc: not isinstance(exc, LedgerError), attempts=5, timeout=10.0
        ):
            with attempt:
                await ledger.book_settlement(booking)
    except Exception:  # noqa: BLE001 - the payer paid: deliver even when the books cannot be written now
        logger.exception(
            "settlement of task %s in %s could not be booked", offer.task_id, response.transaction
        )
        return False
    return True
