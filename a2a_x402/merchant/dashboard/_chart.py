"""The revenue chart: booked revenue per UTC day as bars, laid out here and drawn by a template as SVG.

Server-side and integer-only: bar heights are `plot height * amount // span` with Python integers, so an
amount of any size scales exactly and no float ever touches money. A day whose reversals outweigh its
settlements gets a bar below the baseline. Every bar carries its day and exact amount (the SVG `<title>`,
shown on hover, and the table beside the chart, which needs neither SVG nor JavaScript).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from a2a_x402.merchant.ledger import DailyRevenue

from ._format import AssetInfo, Money, money

__all__ = ["Bar", "RevenueChart", "revenue_charts"]

WIDTH, HEIGHT = 960, 240
COMPACT_WIDTH = 360
"""The phone's chart: drawn at about the size it is shown, so that its labels stay readable."""
_LEFT, _RIGHT, _TOP, _BOTTOM = 8, 8, 24, 28
_PLOT_HEIGHT = HEIGHT - _TOP - _BOTTOM
_LABEL_EVERY_DAYS = 7


@dataclass(frozen=True, slots=True)
class Bar:
    """One day's bar: its box in SVG user units, and what it stands for."""

    day: date
    amount: Money
    x: int
    y: int
    width: int
    height: int
    negative: bool
    label: str | None


@dataclass(frozen=True, slots=True)
class RevenueChart:
    """One asset's chart over `days` days ending `last_day` (UTC)."""

    network: str
    asset: str
    asset_name: str
    first_day: date
    last_day: date
    bars: tuple[Bar, ...]
    baseline_y: int
    peak: Money
    total: Money
    width: int = WIDTH
    height: int = HEIGHT
    label_y: int = HEIGHT - 8


def revenue_charts(
    days: Sequence[DailyRevenue],
    *,
    last_day: date,
    span_days: int,
    assets: Mapping[str, AssetInfo],
    width: int = WIDTH,
) -> list[RevenueChart]:
    """One chart per network and asset in `days` (the ledger's daily revenue), over the `span_days` days
    ending `last_day`, `width` SVG units wide; days without bookings get an empty slot."""
    first_day = last_day - timedelta(days=span_days - 1)
    by_asset: dict[tuple[str, str], dict[date, int]] = {}
    for day in days:
        if first_day <= day.day <= last_day:
            by_asset.setdefault((day.network, day.asset), {})[day.day] = day.net
    return [
        _chart(network, asset, nets, first_day=first_day, span_days=span_days, assets=assets, width=width)
        for (network, asset), nets in sorted(by_asset.items())
    ]


def _chart(
    network: str,
    asset: str,
    nets: Mapping[date, int],
    *,
    first_day: date,
    span_days: int,
    assets: Mapping[str, AssetInfo],
    width: int,
) -> RevenueChart:
    highest = max([net for net in nets.values() if net > 0], default=0)
    lowest = max([-net for net in nets.values() if net < 0], default=0)
    span = max(highest + lowest, 1)
    baseline = _TOP + _PLOT_HEIGHT * highest // span
    slot = (width - _LEFT - _RIGHT) // span_days
    bar_width = max(slot - max(slot // 4, 1), 1)
    bars = []
    for index in range(span_days):
        day = first_day + timedelta(days=index)
        net = nets.get(day, 0)
        height = 0 if net == 0 else max(_PLOT_HEIGHT * abs(net) // span, 1)
        labelled = (span_days - 1 - index) % _LABEL_EVERY_DAYS == 0
        bars.append(
            Bar(
                day=day,
                amount=money(net, asset, assets),
                x=_LEFT + index * slot + (slot - bar_width) // 2,
                y=baseline - height if net > 0 else baseline,
                width=bar_width,
                height=height,
                negative=net < 0,
                label=day.strftime("%m-%d") if labelled else None,
            )
        )
    info = assets.get(asset)
    return RevenueChart(
        network=network,
        asset=asset,
        asset_name=info.name if info is not None else asset,
        first_day=first_day,
        last_day=first_day + timedelta(days=span_days - 1),
        bars=tuple(bars),
        baseline_y=baseline,
        peak=money(highest, asset, assets),
        total=money(sum(nets.values()), asset, assets),
        width=width,
    )
