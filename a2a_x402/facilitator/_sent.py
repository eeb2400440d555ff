"""Every transaction sent for a claim, once it has more than one: a fee-bumped replacement and its originals.

They all carry the same relayer nonce, so at most one of them is ever mined, and that one is the
settlement. The claim row names the newest (the one a pending answer shows and a revive sends again);
these rows let a process that did not send them (a replica, a restart, the taker of a key) wait for any.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import UtcDateTime, write

from ._claims import ClaimState, claims_table
from ._relayer import SentTransaction

__all__ = ["SentTransactionStore", "sent_transactions_table"]

metadata = sa.MetaData()

sent_transactions_table = sa.Table(
    "settlement_transactions",
    metadata,
    sa.Column("tx_hash", sa.String(66), primary_key=True),
    sa.Column("claim_id", sa.String(40), nullable=False),
    sa.Column("relayer", sa.String(42), nullable=False),
    sa.Column("relayer_nonce", sa.BigInteger, nullable=False),
    sa.Column("max_fee_per_gas", sa.BigInteger, nullable=False),
    sa.Column("max_priority_fee_per_gas", sa.BigInteger, nullable=False),
    sa.Column("raw_tx", sa.Text, nullable=False),
    sa.Column("sent_at", UtcDateTime(), nullable=False),
)

_UNFINISHED = [ClaimState.CLAIMED.value, ClaimState.BROADCAST.value]


class SentTransactionStore:
    """Records the transactions of a claim and points the claim at its newest."""

    def __init__(self, engine: AsyncEngine):
        self._engine = engine
        dialect_insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
        self._insert = dialect_insert(sent_transactions_table).on_conflict_do_nothing()

    async def record_replacement(self, claim_id: str, sent: list[SentTransaction]) -> None:
        """Record `sent` (the original first, the replacement last) and make the last the claim's transaction.

        A claim that has ended keeps its transaction: its outcome was recorded from the one that was mined.
        """
        now = datetime.now(UTC)
        rows = [
            {
                "tx_hash": tx.tx_hash,
                "claim_id": claim_id,
                "relayer": tx.sender,
                "relayer_nonce": tx.nonce,
                "max_fee_per_gas": tx.max_fee_per_gas,
                "max_priority_fee_per_gas": tx.max_priority_fee_per_gas,
                "raw_tx": tx.raw,
                "sent_at": now,
            }
            for tx in sent
        ]
        newest = sent[-1]
        follow = (
            claims_table.update()
            .where(claims_table.c.id == claim_id, claims_table.c.state.in_(_UNFINISHED))
            .values(
                state=ClaimState.BROADCAST.value,
                relayer=newest.sender,
                relayer_nonce=newest.nonce,
                tx_hash=newest.tx_hash,
                raw_tx=newest.raw,
                updated_at=now,
            )
        )

        def operation(connection: sa.Connection) -> None:
            connection.execute(self._insert, rows)
            connection.execute(follow)

        await write(self._engine, operation)

    async def of_claim_with(self, tx_hash: str) -> list[SentTransaction]:
        """Every transaction recorded for the claim that `tx_hash` was sent for (empty if none was)."""
        claim_of = sa.select(sent_transactions_table.c.claim_id).where(
            sent_transactions_table.c.tx_hash == tx_hash
        )
        statement = (
            sa.select(sent_transactions_table)
            .where(sent_transactions_table.c.claim_id.in_(claim_of))
            .order_by(sent_transactions_table.c.sent_at)
        )
        async with self._engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
        return [
            SentTransaction(
                tx_hash=row.tx_hash,
                raw=row.raw_tx,
                nonce=row.relayer_nonce,
                sender=row.relayer,
                max_fee_per_gas=row.max_fee_per_gas,
                max_priority_fee_per_gas=row.max_priority_fee_per_gas,
            )
            for row in rows
        ]
