"""The overview's totals for today, 7 and 30 days (UTC days, today included, net of reversals) at the
windows' edges, and a payer's row as the dashboard shows it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from a2a_x402.merchant.dashboard import AssetInfo
from a2a_x402.merchant.dashboard._activity import payer_views, totals
from a2a_x402.merchant.ledger import DailyRevenue, PayerTotal

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
OTHER = "0x" + "ab" * 20
NETWORK = "eip155:84532"
ASSETS = {USDC: AssetInfo(name="USDC", decimals=6)}
TODAY = date(2026, 12, 5)


def _day(days_ago: int, credits: int, debits: int = 0, asset: str = USDC) -> DailyRevenue:
    return DailyRevenue(
        day=TODAY - timedelta(days=days_ago), network=NETWORK, asset=asset, credits=credits, debits=debits
    )


def test_each_window_ends_today_and_reaches_back_its_span_of_days_inclusive() -> None:
    days = [
        _day(0, 1),  # today: in all three
        _day(1, 10),  # yesterday: 7 and 30
        _day(6, 100),  # the 7-day window's first day
        _day(7, 1_000),  # just outside it: 30 only
        _day(29, 10_000),  # the 30-day window's first day
        _day(30, 100_000),  # outside every window
        _day(-1, 1_000_000),  # a booking stamped tomorrow (a clock ahead) is in none
    ]

    [view] = totals(days, today=TODAY, assets=ASSETS)

    assert [amount.atomic for amount in view.amounts] == [1, 111, 11_111]
    assert (view.asset_name, view.amounts[2].display) == ("USDC", "$0.011111")


def test_reversals_are_netted_per_asset_and_an_unknown_asset_is_shown_in_atomic_units() -> None:
    days = [_day(0, 500, debits=200), _day(3, 0, debits=100), _day(0, 7, asset=OTHER)]

    usdc, other = sorted(totals(days, today=TODAY, assets=ASSETS), key=lambda view: view.asset != USDC)

    assert [amount.atomic for amount in usdc.amounts] == [300, 200, 200]
    assert [amount.atomic for amount in other.amounts] == [7, 7, 7]
    assert (other.asset_name, other.amounts[0].display) == (OTHER, "7 atomic units")


def test_a_payer_row_shows_its_count_total_and_last_seen_in_utc() -> None:
    seen = datetime(2026, 12, 5, 13, 4, 5, tzinfo=UTC).astimezone(
        datetime.now().astimezone().tzinfo  # the database's time zone is not the page's
    )
    [row] = payer_views(
        [PayerTotal(payer=OTHER, network=NETWORK, asset=USDC, count=3, total=2_500_000, last_seen=seen)],
        ASSETS,
    )

    assert (row.count, row.total.display, row.last_seen) == (3, "$2.50", "2026-12-05 13:04:05Z")
