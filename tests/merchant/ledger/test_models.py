"""The SQLAlchemy models and migration m0002 describe the same ledger tables, on both backends."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import Ledger, LedgerBase, LedgerEntry
from tests.fixtures.schema import migration_differences

from .bookings import booking


async def test_models_match_the_migration(database_url: str) -> None:
    assert await migration_differences(database_url, LedgerBase.metadata) == []
    assert set(LedgerBase.metadata.tables) == {
        "ledger_accounts",
        "ledger_entries",
        "ledger_finalizations",
        "ledger_lines",
        "ledger_sequence",
        "ledger_unfinalized",
    }


async def test_the_schema_itself_refuses_zero_amounts_and_a_second_settlement(
    ledger: Ledger, engine: AsyncEngine
) -> None:
    entry = await ledger.book_settlement(booking())
    async with engine.connect() as connection:
        row = (
            await connection.execute(sa.select(LedgerEntry.__table__).where(LedgerEntry.id == entry.id))
        ).one()
    copy = {**row._asdict(), "id": "je_copy", "sequence": 99}

    for values in (copy, {**copy, "nonce": "0x" + "00" * 32, "amount": 0}):
        with pytest.raises(IntegrityError):
            async with engine.begin() as connection:
                await connection.execute(sa.insert(LedgerEntry).values(values))
    async with engine.begin() as connection:  # a reversal of the same authorization is a different kind
        await connection.execute(
            sa.insert(LedgerEntry).values(
                {**copy, "kind": "reversal", "reverses_entry_id": entry.id, "reason": "x"}
            )
        )
        await connection.rollback()  # it has no lines: keep the books balanced for the audit
