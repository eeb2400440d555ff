"""The settlements the reconciler still watches are a list of their own (`ledger_unfinalized`), written
with the facts, refilled from the facts by migration m0006, and held to them by `check_invariants`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402 import migrations
from a2a_x402.merchant.ledger import Ledger, LedgerInvariantError, check_invariants
from a2a_x402.storage import normalize_url, upgrade_schema

from .bookings import booking


async def _three(ledger: Ledger) -> tuple[str, str, str]:
    """(open, finalized, reversed) settlements."""
    entries = [await ledger.book_settlement(booking()) for _ in range(3)]
    await ledger.mark_final(entries[1].id, confirmations=1)
    await ledger.reverse_settlement(entries[2].id)
    return entries[0].id, entries[1].id, entries[2].id


async def _listed(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as connection:
        return list((await connection.execute(sa.text("SELECT entry_id FROM ledger_unfinalized"))).scalars())


async def test_only_settlements_neither_final_nor_reversed_are_watched(
    ledger: Ledger, engine: AsyncEngine
) -> None:
    open_id, _, _ = await _three(ledger)

    assert [entry.id for entry in await ledger.unfinalized_settlements()] == [open_id]
    assert await _listed(engine) == [open_id]
    await check_invariants(engine)


async def test_a_list_that_disagrees_with_the_facts_breaks_the_invariants(
    ledger: Ledger, engine: AsyncEngine
) -> None:
    _, final_id, _ = await _three(ledger)
    async with engine.begin() as connection:
        await connection.execute(
            sa.text("INSERT INTO ledger_unfinalized VALUES (:id, 999)"), {"id": final_id}
        )

    with pytest.raises(LedgerInvariantError, match="unfinalized list"):
        await check_invariants(engine)
    async with engine.begin() as connection:
        await connection.execute(sa.text("DELETE FROM ledger_unfinalized WHERE sequence = 999"))


async def test_m0006_fills_the_list_from_the_facts(
    ledger: Ledger, engine: AsyncEngine, database_url: str
) -> None:
    open_id, _, _ = await _three(ledger)
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", normalize_url(database_url).replace("%", "%%"))
    await engine.dispose()

    await asyncio.to_thread(command.downgrade, config, "m0005")
    await upgrade_schema(database_url)

    assert await _listed(engine) == [open_id]
    await check_invariants(engine)
