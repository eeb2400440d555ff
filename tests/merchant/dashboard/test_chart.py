"""The revenue chart's layout: one bar per day, heights in integer proportion, reversals below the line."""

from __future__ import annotations

from datetime import date, timedelta

from a2a_x402.merchant.dashboard import AssetInfo
from a2a_x402.merchant.dashboard._chart import HEIGHT, WIDTH, revenue_charts
from a2a_x402.merchant.ledger import DailyRevenue

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
EURC = "0x808456652fdb597867f38412077A9182bf77359F"
NETWORK = "eip155:84532"
LAST = date(2026, 12, 1)
ASSETS = {USDC: AssetInfo(name="USDC", decimals=6)}


def _day(days_ago: int, credits: int, debits: int = 0, asset: str = USDC) -> DailyRevenue:
    return DailyRevenue(
        day=LAST - timedelta(days=days_ago), network=NETWORK, asset=asset, credits=credits, debits=debits
    )


def test_bars_scale_in_integers_and_every_day_has_a_slot() -> None:
    huge = 2**200
    [chart] = revenue_charts(
        [_day(0, huge), _day(2, huge // 2), _day(40, 5)], last_day=LAST, span_days=30, assets=ASSETS
    )

    assert len(chart.bars) == 30 and chart.bars[-1].day == LAST and chart.first_day == LAST - timedelta(29)
    today, two_days_ago = chart.bars[-1], chart.bars[-3]
    assert today.height == 2 * two_days_ago.height  # exact proportion, whatever the size
    assert (
        today.y + today.height == chart.baseline_y == HEIGHT - 28
    )  # nothing negative: baseline at the bottom
    assert [bar.height for bar in chart.bars].count(0) == 28  # the day 40 days ago is outside the window
    assert chart.peak.atomic == huge and chart.total.atomic == huge + huge // 2
    assert all(0 <= bar.x and bar.x + bar.width <= WIDTH for bar in chart.bars)
    assert [bar.label for bar in chart.bars if bar.label] == ["11-03", "11-10", "11-17", "11-24", "12-01"]
    assert today.amount.text == format(huge // 10**6, ",") + "." + format(huge % 10**6, "06d")


def test_a_day_of_reversals_goes_below_the_line_and_each_asset_has_its_chart() -> None:
    usdc, eurc = revenue_charts(
        [_day(1, 300), _day(0, 0, debits=100), _day(0, 9, asset=EURC)],
        last_day=LAST,
        span_days=7,
        assets=ASSETS,
    )

    up, down = usdc.bars[-2], usdc.bars[-1]
    assert (up.negative, down.negative) == (False, True)
    assert up.y + up.height == usdc.baseline_y == down.y
    assert up.height == 3 * down.height
    assert usdc.total.atomic == 200 and usdc.asset_name == "USDC"
    assert eurc.asset_name == EURC and eurc.peak.unit == "atomic units"
