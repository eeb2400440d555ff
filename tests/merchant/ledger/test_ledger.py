"""Booking, idempotency, concurrency, reversal, finality and the chain scan's reads, on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.ledger import (
    BookingConflictError,
    EntryKind,
    EntryNotFoundError,
    EntryNotReversibleError,
    EntryReversedError,
    EntryStatus,
    InvalidBookingError,
    Ledger,
    LedgerEntry,
    LedgerLine,
    SettlementBooked,
    SettlementFinalized,
    SettlementReversed,
)

from .bookings import CHAIN_ID, EURC, OTHER_PAYER, PAY_TO, PAYER, USDC, RecordingSink, booking


async def _count(engine: AsyncEngine, table: sa.FromClause) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(sa.select(sa.func.count()).select_from(table))).scalar_one())


async def test_booking_posts_one_balanced_entry(
    ledger: Ledger, sink: RecordingSink, engine: AsyncEngine
) -> None:
    settlement = booking(payer=PAYER.lower(), amount=7_000_000)

    entry = await ledger.book_settlement(settlement)

    assert entry.id.startswith("je_") and entry.sequence == 1
    assert (entry.kind, entry.status) == (EntryKind.SETTLEMENT, EntryStatus.SETTLED)
    assert entry.payer == PAYER  # normalized to EIP-55
    assert (entry.amount, entry.tx_hash, entry.effective_at) == (
        7_000_000,
        settlement.tx_hash,
        settlement.settled_at,
    )
    assert await ledger.get_entry(entry.id) == entry
    assert sink.facts == [SettlementBooked(entry)]
    async with engine.connect() as connection:
        lines = (await connection.execute(sa.select(LedgerLine.__table__))).all()
    assert sorted((line.direction, line.amount, line.balance_after) for line in lines) == [
        ("credit", 7_000_000, 7_000_000),
        ("debit", 7_000_000, 7_000_000),
    ]
    [balance] = await ledger.balance("acme")
    assert (balance.asset, balance.balance, balance.credits, balance.debits) == (
        USDC,
        7_000_000,
        7_000_000,
        0,
    )


async def test_the_booking_line_names_the_default_tenant_default(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="a2a_x402.merchant.ledger"):
        entry = await ledger.book_settlement(booking(tenant=""))

    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("booked settlement")]
    assert line == f"booked settlement {entry.id} (tenant default, amount 2500000, tx {entry.tx_hash})"


async def test_balances_are_per_tenant_asset_and_exact_beyond_64_bits(ledger: Ledger) -> None:
    huge = 2**255 + 12345  # far beyond int64 and float precision
    await ledger.book_settlement(booking(amount=huge))
    await ledger.book_settlement(booking(amount=1, payer=OTHER_PAYER))
    await ledger.book_settlement(booking(amount=5, asset=EURC))
    await ledger.book_settlement(booking(amount=9, tenant="globex"))

    acme = {item.asset: item.balance for item in await ledger.balance("acme")}
    assert acme == {USDC: huge + 1, EURC: 5}
    assert [item.balance for item in await ledger.balance("acme", asset=EURC.lower())] == [5]
    assert [item.balance for item in await ledger.balance("globex")] == [9]
    assert await ledger.balance("nobody") == []


async def test_booking_twice_returns_the_same_entry_and_publishes_once(
    ledger: Ledger, sink: RecordingSink, engine: AsyncEngine
) -> None:
    settlement = booking()
    first = await ledger.book_settlement(settlement)
    # A retry may report another block (a shallow reorg moved the transaction): still the same booking.
    again = await ledger.book_settlement(
        booking(
            nonce=settlement.nonce.upper().replace("0X", "0x"), tx_hash=settlement.tx_hash, block_number=99
        )
    )

    assert again == first
    assert len(sink.facts) == 1
    assert await _count(engine, LedgerEntry.__table__) == 1
    assert await ledger.has_authorization(settlement.chain_id, USDC.lower(), PAYER, settlement.nonce)
    assert not await ledger.has_authorization(settlement.chain_id, USDC, OTHER_PAYER, settlement.nonce)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tenant", "globex"),
        ("amount", 1),
        ("task_id", "task-2"),
        ("pay_to", OTHER_PAYER),
        ("tx_hash", "0x" + "ab" * 32),
    ],
)
async def test_same_authorization_with_other_details_is_a_conflict(
    ledger: Ledger, field: str, value: object
) -> None:
    settlement = booking()
    first = await ledger.book_settlement(settlement)
    changed = booking(**{"nonce": settlement.nonce, "tx_hash": settlement.tx_hash, field: value})

    with pytest.raises(BookingConflictError) as raised:
        await ledger.book_settlement(changed)

    assert raised.value.entry_id == first.id and raised.value.fields == (field,)
    assert raised.value.code == "booking_conflict"


async def test_twenty_concurrent_bookings_of_one_authorization_make_one_entry(
    ledger: Ledger, sink: RecordingSink, engine: AsyncEngine
) -> None:
    settlement = booking(amount=1_000)

    entries = await asyncio.gather(*(ledger.book_settlement(settlement) for _ in range(20)))

    assert len({entry.id for entry in entries}) == 1
    assert len(sink.facts) == 1
    assert await _count(engine, LedgerEntry.__table__) == 1
    assert [item.balance for item in await ledger.balance("acme")] == [1_000]


async def test_concurrent_distinct_bookings_get_gap_free_sequences_and_exact_totals(
    ledger: Ledger, sink: RecordingSink
) -> None:
    amounts = [10**18 + index for index in range(20)]

    entries = await asyncio.gather(
        *(
            ledger.book_settlement(booking(amount=amount, payer=(PAYER, OTHER_PAYER)[i % 2]))
            for i, amount in enumerate(amounts)
        )
    )

    assert sorted(entry.sequence for entry in entries) == list(range(1, 21))
    # Sequence numbers are taken under the counter's lock, so they follow commit (= publish) order.
    assert [fact.sequence for fact in sink.facts] == list(range(1, 21))
    assert [item.balance for item in await ledger.balance("acme")] == [sum(amounts)]


async def test_a_failing_event_sink_rolls_the_booking_back(
    ledger: Ledger, sink: RecordingSink, engine: AsyncEngine
) -> None:
    sink.fail_with = RuntimeError("outbox unavailable")

    with pytest.raises(RuntimeError, match="outbox unavailable"):
        await ledger.book_settlement(booking())

    assert await _count(engine, LedgerEntry.__table__) == 0
    assert await _count(engine, LedgerLine.__table__) == 0
    assert await ledger.balance("acme") == []
    sink.fail_with = None
    assert (await ledger.book_settlement(booking())).sequence == 1  # the failed attempt left no gap


async def test_reversal_is_a_new_entry_that_undoes_the_settlement(
    ledger: Ledger, sink: RecordingSink
) -> None:
    kept = await ledger.book_settlement(booking(amount=100))
    reorged = await ledger.book_settlement(booking(amount=40))
    when = datetime(2026, 12, 1, tzinfo=UTC)

    reversal = await ledger.reverse_settlement(reorged.id, reason="reorg", reversed_at=when)

    assert reversal.kind is EntryKind.REVERSAL and reversal.reverses_entry_id == reorged.id
    assert (reversal.amount, reversal.reason, reversal.effective_at, reversal.sequence) == (
        40,
        "reorg",
        when,
        3,
    )
    assert (await ledger.get_entry(reorged.id)).status is EntryStatus.REVERSED
    assert (await ledger.get_entry(kept.id)).status is EntryStatus.SETTLED
    assert [item.balance for item in await ledger.balance("acme")] == [100]
    fact = sink.facts[-1]
    assert isinstance(fact, SettlementReversed)
    assert fact.reversal == reversal and fact.original.id == reorged.id
    assert fact.original.status is EntryStatus.REVERSED


async def test_reversal_is_idempotent_and_concurrent_safe(ledger: Ledger, sink: RecordingSink) -> None:
    entry = await ledger.book_settlement(booking(amount=100))

    reversals = await asyncio.gather(*(ledger.reverse_settlement(entry.id) for _ in range(5)))

    assert len({reversal.id for reversal in reversals}) == 1
    assert sum(isinstance(fact, SettlementReversed) for fact in sink.facts) == 1
    assert [item.balance for item in await ledger.balance("acme")] == [0]
    # Booking the reversed authorization again returns the stored, reversed entry: it is never booked twice.
    again = await ledger.book_settlement(booking(nonce=entry.nonce, tx_hash=entry.tx_hash, amount=100))
    assert (again.id, again.status) == (entry.id, EntryStatus.REVERSED)


async def test_reversing_a_reversal_or_an_unknown_entry_is_refused(ledger: Ledger) -> None:
    entry = await ledger.book_settlement(booking())
    reversal = await ledger.reverse_settlement(entry.id)

    with pytest.raises(EntryNotReversibleError):
        await ledger.reverse_settlement(reversal.id)
    with pytest.raises(EntryNotFoundError):
        await ledger.reverse_settlement("je_missing")
    with pytest.raises(InvalidBookingError, match="reason"):
        await ledger.reverse_settlement(entry.id, reason="")


async def test_finality_is_recorded_once_as_its_own_fact(ledger: Ledger, sink: RecordingSink) -> None:
    entry = await ledger.book_settlement(booking())
    when = datetime(2026, 12, 1, 8, tzinfo=UTC)

    finals = await asyncio.gather(
        *(ledger.mark_final(entry.id, confirmations=12, finalized_at=when) for _ in range(3))
    )

    assert len({final.id for final in finals}) == 1
    final = finals[0]
    assert (final.entry_id, final.confirmations, final.finalized_at, final.sequence) == (
        entry.id,
        12,
        when,
        2,
    )
    stored = await ledger.get_entry(entry.id)
    assert stored.status is EntryStatus.FINALIZED
    assert (
        stored.sequence == entry.sequence and stored.booked_at == entry.booked_at
    )  # the entry itself is untouched
    [fact] = [fact for fact in sink.facts if isinstance(fact, SettlementFinalized)]
    assert fact.finalization == final and fact.entry.status is EntryStatus.FINALIZED


async def test_a_reversed_settlement_cannot_become_final_but_a_final_one_can_be_reversed(
    ledger: Ledger,
) -> None:
    reversed_first = await ledger.book_settlement(booking())
    await ledger.reverse_settlement(reversed_first.id)
    final_first = await ledger.book_settlement(booking())
    await ledger.mark_final(final_first.id, confirmations=3)

    with pytest.raises(EntryReversedError):
        await ledger.mark_final(reversed_first.id, confirmations=3)
    await ledger.reverse_settlement(final_first.id, reason="deep reorg")

    assert (await ledger.get_entry(final_first.id)).status is EntryStatus.REVERSED
    with pytest.raises(InvalidBookingError, match="confirmations"):
        await ledger.mark_final(final_first.id, confirmations=0)


async def test_naive_times_are_refused(ledger: Ledger) -> None:
    entry = await ledger.book_settlement(booking())
    naive = datetime(2026, 12, 1)  # noqa: DTZ001 - the point of the test

    with pytest.raises(InvalidBookingError, match="reversed_at"):
        await ledger.reverse_settlement(entry.id, reversed_at=naive)
    with pytest.raises(InvalidBookingError, match="since"):
        await ledger.statement("acme", since=naive)
    assert await ledger.statement("acme", until=entry.booked_at - timedelta(seconds=1)) == []


async def test_the_chain_scan_reads_settlements_by_nonce_and_finalized_ones_by_chain_payee_and_block(
    ledger: Ledger,
) -> None:
    kept = await ledger.book_settlement(booking(block_number=100))
    reversed_ = await ledger.book_settlement(booking(block_number=100))
    early = await ledger.book_settlement(booking(block_number=99))
    other_payee = await ledger.book_settlement(booking(pay_to=OTHER_PAYER, block_number=100))
    other_chain = await ledger.book_settlement(booking(chain_id=1, network="eip155:1", block_number=100))
    other_asset = await ledger.book_settlement(booking(asset=EURC, block_number=100))
    for entry in (kept, reversed_, early, other_payee, other_chain, other_asset):
        await ledger.mark_final(entry.id, confirmations=1)
    await ledger.reverse_settlement(reversed_.id, reason="test")

    nonces = [kept.nonce.upper(), reversed_.nonce, "0x01"]
    found = await ledger.settlements_of(CHAIN_ID, USDC.lower(), nonces)
    assert {(e.id, e.status) for e in found} == {
        (kept.id, EntryStatus.FINALIZED),
        (reversed_.id, EntryStatus.REVERSED),
    }
    finalized = await ledger.finalized_settlements_since(CHAIN_ID, USDC, [PAY_TO.lower()], 100)
    assert [e.id for e in finalized] == [kept.id]
    assert await ledger.finalized_settlements_since(CHAIN_ID, USDC, [], 0) == []
