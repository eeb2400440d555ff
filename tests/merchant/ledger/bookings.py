"""Test data for the ledger: bookings with fresh authorizations, and an event sink that records facts."""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from a2a_x402.merchant.ledger import LedgerFact, SettlementBooking

PAYER = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
OTHER_PAYER = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"
PAY_TO = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
EURC = "0x808456652fdb597867f38412077A9182bf77359F"
NETWORK = "eip155:84532"
CHAIN_ID = 84532
SETTLED_AT = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def booking(**changes: object) -> SettlementBooking:
    """A valid booking for tenant `acme` with a fresh nonce and transaction hash; `changes` override."""
    base = SettlementBooking(
        tenant="acme",
        task_id="task-1",
        context_id="ctx-1",
        payer=PAYER,
        pay_to=PAY_TO,
        asset=USDC,
        network=NETWORK,
        chain_id=CHAIN_ID,
        amount=2_500_000,
        nonce="0x" + secrets.token_hex(32),
        tx_hash="0x" + secrets.token_hex(32),
        block_number=1234,
        settled_at=SETTLED_AT,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


class RecordingSink:
    """A `LedgerEventSink` that remembers the facts it is handed (and can be told to fail)."""

    def __init__(self) -> None:
        self.facts: list[LedgerFact] = []
        self.fail_with: Exception | None = None

    async def publish(self, connection: AsyncConnection, fact: LedgerFact) -> None:
        """Record `fact`; raise `fail_with` if set (to prove the fact rolls back with its events)."""
        assert connection.in_transaction()
        if self.fail_with is not None:
            raise self.fail_with
        self.facts.append(fact)
