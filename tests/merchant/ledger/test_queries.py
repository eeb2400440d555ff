"""The ledger's per-tenant reads for the dashboard: settlements with their facts, by status, one by id, and
revenue booked per day, the payers and the counts, each only ever the tenant's own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from a2a_x402.merchant.ledger import (
    DailyRevenue,
    EntryNotFoundError,
    EntryStatus,
    InvalidBookingError,
    Ledger,
)

from .bookings import EURC, NETWORK, USDC, booking


async def _three_states(ledger: Ledger, tenant: str = "acme") -> tuple[str, str, str]:
    """Book three settlements for `tenant`: one left settled, one finalized, one reversed (in that order)."""
    settled = await ledger.book_settlement(booking(tenant=tenant, amount=1))
    final = await ledger.book_settlement(booking(tenant=tenant, amount=2))
    await ledger.mark_final(final.id, confirmations=3)
    gone = await ledger.book_settlement(booking(tenant=tenant, amount=4))
    await ledger.reverse_settlement(gone.id, reason="reorg: gone")
    return settled.id, final.id, gone.id


async def test_settlements_come_newest_first_with_their_finalization_and_reversal(ledger: Ledger) -> None:
    settled, final, gone = await _three_states(ledger)
    await _three_states(ledger, "globex")

    records = await ledger.settlements("acme")

    assert [record.entry.id for record in records] == [gone, final, settled]
    assert [record.entry.status for record in records] == [
        EntryStatus.REVERSED,
        EntryStatus.FINALIZED,
        EntryStatus.SETTLED,
    ]
    reversed_, finalized, open_ = records
    assert reversed_.reversal is not None and reversed_.reversal.reverses_entry_id == gone
    assert reversed_.reversal.reason == "reorg: gone" and reversed_.finalization is None
    assert finalized.finalization is not None and finalized.finalization.confirmations == 3
    assert finalized.reversal is None
    assert (open_.finalization, open_.reversal) == (None, None)
    assert {record.entry.tenant for record in records} == {"acme"}


async def test_settlements_by_status_and_limit(ledger: Ledger) -> None:
    settled, final, gone = await _three_states(ledger)
    await _three_states(ledger, "globex")

    by_status = {
        status: [record.entry.id for record in await ledger.settlements("acme", status=status)]
        for status in EntryStatus
    }
    newest = await ledger.settlements("acme", limit=1)

    assert by_status == {
        EntryStatus.SETTLED: [settled],
        EntryStatus.FINALIZED: [final],
        EntryStatus.REVERSED: [gone],
    }
    assert [record.entry.id for record in newest] == [gone]
    assert [entry.id for entry in await ledger.unfinalized_settlements("acme")] == [settled]
    assert len(await ledger.unfinalized_settlements()) == 2  # both tenants'


async def test_one_settlement_is_found_only_for_its_own_tenant(ledger: Ledger) -> None:
    settled, final, gone = await _three_states(ledger)
    [reversal] = [r.reversal for r in await ledger.settlements("acme", status=EntryStatus.REVERSED)]
    assert reversal is not None

    record = await ledger.settlement("acme", final)

    assert record.entry.id == final and record.finalization is not None
    for tenant, entry_id in (("globex", final), ("", settled), ("acme", reversal.id), ("acme", "je_nosuch")):
        with pytest.raises(EntryNotFoundError):
            await ledger.settlement(tenant, entry_id)


async def test_daily_revenue_sums_exactly_per_booking_day_and_asset(ledger: Ledger) -> None:
    huge = 2**200 + 1  # beyond any float's exactness, and SQLite's integers
    await ledger.book_settlement(booking(amount=huge))
    await ledger.book_settlement(booking(amount=huge + 1))
    await ledger.book_settlement(booking(asset=EURC, amount=7))
    gone = await ledger.book_settlement(booking(amount=5))
    await ledger.reverse_settlement(gone.id)
    await ledger.book_settlement(booking(tenant="globex", amount=11))
    today = datetime.now(UTC).date()
    since = datetime.combine(today, datetime.min.time(), UTC)

    days = await ledger.daily_revenue("acme", since, since + timedelta(days=1))
    yesterday = await ledger.daily_revenue("acme", since - timedelta(days=1), since)

    assert days == [  # by day, network and asset address (USDC's 0x036C… before EURC's 0x8084…)
        DailyRevenue(day=today, network=NETWORK, asset=USDC, credits=2 * huge + 1 + 5, debits=5),
        DailyRevenue(day=today, network=NETWORK, asset=EURC, credits=7, debits=0),
    ]
    assert {day.net for day in days} == {2 * huge + 1, 7}
    assert yesterday == []
    with pytest.raises(InvalidBookingError):
        await ledger.daily_revenue("acme", since.replace(tzinfo=None), since)


async def test_settlements_page_by_sequence_cursor_and_booking_range(ledger: Ledger) -> None:
    settled, final, gone = await _three_states(ledger)
    await _three_states(ledger, "globex")
    [newest, middle, oldest] = await ledger.settlements("acme")
    now = datetime.now(UTC)

    below_newest = await ledger.settlements("acme", before=newest.entry.sequence)
    below_oldest = await ledger.settlements("acme", before=oldest.entry.sequence)
    one_page = await ledger.settlements("acme", before=newest.entry.sequence, limit=1)
    hour = timedelta(hours=1)
    in_range = await ledger.settlements("acme", since=now - hour, until=now + hour)
    before_range = await ledger.settlements("acme", until=now - timedelta(hours=1))
    after_range = await ledger.settlements("acme", since=now + timedelta(hours=1))

    assert [r.entry.id for r in below_newest] == [final, settled]
    assert below_oldest == []
    assert [r.entry.id for r in one_page] == [final]
    assert [r.entry.id for r in in_range] == [gone, final, settled]
    assert before_range == after_range == []
    assert {r.entry.tenant for r in below_newest + in_range} == {"acme"}
    with pytest.raises(InvalidBookingError):
        await ledger.settlements("acme", since=now.replace(tzinfo=None))


async def test_payers_sum_the_settlements_that_stand_exactly_per_asset(ledger: Ledger) -> None:
    other = "0x" + "ab" * 20
    huge = 2**200 + 1  # beyond any float's exactness, and SQLite's integers
    await ledger.book_settlement(booking(amount=huge))
    await ledger.book_settlement(booking(amount=huge + 1))
    await ledger.book_settlement(booking(asset=EURC, amount=7))
    gone = await ledger.book_settlement(booking(payer=other, amount=5))
    await ledger.reverse_settlement(gone.id)
    await ledger.book_settlement(booking(payer=other, amount=3))
    await ledger.book_settlement(booking(tenant="globex", amount=11))

    payers = await ledger.payers("acme")

    assert [(p.asset, p.count, p.total) for p in payers] == [
        (USDC, 2, 2 * huge + 1),
        (EURC, 1, 7),
        (USDC, 1, 3),
    ]
    assert payers[2].payer.lower() == other
    assert all(p.last_seen.tzinfo is not None for p in payers)
    assert [p.total for p in await ledger.payers("globex")] == [11]
    assert await ledger.payers("nobody") == []


async def test_a_payer_is_last_seen_at_its_latest_settlement_that_stands(ledger: Ledger) -> None:
    first = await ledger.book_settlement(booking(amount=5))
    latest = await ledger.book_settlement(booking(amount=6))
    other = await ledger.book_settlement(booking(payer="0x" + "ab" * 20, amount=1))
    assert first.booked_at <= latest.booked_at <= other.booked_at

    [payer, _] = await ledger.payers("acme")
    assert (payer.count, payer.last_seen) == (2, latest.booked_at)

    # A reversed settlement no longer stands: the payer was last seen at the one before it.
    await ledger.reverse_settlement(latest.id)
    [payer, _] = await ledger.payers("acme")
    assert (payer.count, payer.last_seen) == (1, first.booked_at)


async def test_payers_are_summed_counted_and_limited_by_the_database_largest_first(ledger: Ledger) -> None:
    for index, amount in enumerate((5, 9, 7)):
        await ledger.book_settlement(booking(payer="0x" + f"{index + 1:02x}" * 20, amount=amount))
    await ledger.book_settlement(booking(payer="0x" + "01" * 20, amount=6))  # the first payer's second

    largest = await ledger.payers("acme", limit=2)

    assert [(p.count, p.total) for p in largest] == [(2, 11), (1, 9)]
    assert await ledger.payer_count("acme") == 3
    assert await ledger.payer_count("nobody") == 0


async def test_settlements_are_counted_by_status_per_tenant(ledger: Ledger) -> None:
    await _three_states(ledger)
    await _three_states(ledger, "globex")
    await ledger.book_settlement(booking(tenant="globex"))

    assert await ledger.settlement_count("acme") == 3
    assert [await ledger.settlement_count("acme", status=status) for status in EntryStatus] == [1, 1, 1]
    assert await ledger.settlement_count("globex", status=EntryStatus.SETTLED) == 2
    assert await ledger.settlement_count("nobody") == 0
