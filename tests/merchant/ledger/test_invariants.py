"""The invariant audit passes on real books and catches each kind of tampering."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import (
    Ledger,
    LedgerAccount,
    LedgerEntry,
    LedgerInvariantError,
    LedgerLine,
    check_invariants,
)
from a2a_x402.storage import create_engine

from .bookings import OTHER_PAYER, RecordingSink, booking


@pytest.fixture
async def books(sqlite_url: str) -> AsyncIterator[tuple[AsyncEngine, Ledger]]:
    """An engine on books with settlements, a finalization and a reversal (not audited at teardown)."""
    engine = create_engine(sqlite_url)
    ledger = Ledger(engine, RecordingSink())
    first = await ledger.book_settlement(booking(amount=500))
    second = await ledger.book_settlement(booking(amount=70, payer=OTHER_PAYER))
    await ledger.mark_final(first.id, confirmations=1)
    await ledger.reverse_settlement(second.id)
    yield engine, ledger
    await engine.dispose()


async def _tamper(engine: AsyncEngine, statement: sa.Executable) -> None:
    async with engine.begin() as connection:
        await connection.execute(statement)


async def test_real_books_hold(books: tuple[AsyncEngine, Ledger]) -> None:
    engine, _ledger = books
    await check_invariants(engine)


async def test_an_account_total_out_of_step_with_its_lines_is_caught(
    books: tuple[AsyncEngine, Ledger],
) -> None:
    engine, _ledger = books
    await _tamper(
        engine, sa.update(LedgerAccount).where(LedgerAccount.kind == "revenue").values(credits_posted=1)
    )

    with pytest.raises(LedgerInvariantError) as raised:
        await check_invariants(engine)

    assert any("lines sum to" in problem for problem in raised.value.problems)
    assert any("Σ debits" in problem for problem in raised.value.problems)


async def test_an_unbalanced_entry_is_caught(books: tuple[AsyncEngine, Ledger]) -> None:
    engine, _ledger = books
    await _tamper(engine, sa.update(LedgerLine).where(LedgerLine.direction == "debit").values(amount=1))

    with pytest.raises(LedgerInvariantError, match="debits and credits differ") as raised:
        await check_invariants(engine)

    assert raised.value.code == "ledger_invariant_violated"


async def test_a_reversal_that_does_not_match_its_settlement_is_caught(
    books: tuple[AsyncEngine, Ledger],
) -> None:
    engine, _ledger = books
    await _tamper(
        engine, sa.update(LedgerEntry).where(LedgerEntry.kind == "reversal").values(tenant="globex")
    )

    with pytest.raises(LedgerInvariantError, match="does not match the settlement it reverses"):
        await check_invariants(engine)
