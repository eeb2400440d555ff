"""The overview's summaries: revenue totals for today, 7 and 30 days, the payers, and the payments that
were refused or failed (a page at a time), reduced to display values.

Totals are sums of the ledger's daily revenue (UTC days, net of reversals), in Python integers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from a2a_x402.merchant.ledger import DailyRevenue, PayerTotal
from a2a_x402.merchant.payments import UnpaidAttempt

from ._format import AssetInfo, Money, format_time, money

__all__ = [
    "TOTAL_WINDOWS",
    "PayerView",
    "TotalView",
    "UnpaidPage",
    "UnpaidView",
    "payer_views",
    "totals",
    "unpaid_views",
]

TOTAL_WINDOWS = (1, 7, 30)
"""The totals' windows in UTC days, today included: today, the last 7 days, the last 30 days."""


@dataclass(frozen=True, slots=True)
class TotalView:
    """One asset's booked revenue (net of reversals) in each of `TOTAL_WINDOWS`."""

    network: str
    asset: str
    asset_name: str
    amounts: tuple[Money, ...]


@dataclass(frozen=True, slots=True)
class PayerView:
    """A payer of the tenant in one asset: how many settlements stand, their sum, the last one's time."""

    payer: str
    network: str
    count: int
    total: Money
    last_seen: str


@dataclass(frozen=True, slots=True)
class UnpaidView:
    """A payment that did not go through, and why."""

    task_id: str
    skill: str
    state: str
    error: str
    reason: str
    payer: str | None
    network: str | None
    amount: Money | None
    at: str


@dataclass(frozen=True, slots=True)
class UnpaidPage:
    """A page of the refused and failed payments, most recent first: its rows, the cursor it was read after
    (None for the first page) and the next page's (None on the last page); `known` is False when the
    dashboard does not read the payment offers."""

    rows: tuple[UnpaidView, ...]
    before: str | None
    next_before: str | None
    known: bool = True


def totals(days: Sequence[DailyRevenue], *, today: date, assets: Mapping[str, AssetInfo]) -> list[TotalView]:
    """Per network and asset in `days`, the revenue of each window of `TOTAL_WINDOWS` ending `today`."""
    sums: dict[tuple[str, str], list[int]] = {}
    for day in days:
        windows = sums.setdefault((day.network, day.asset), [0] * len(TOTAL_WINDOWS))
        for index, span in enumerate(TOTAL_WINDOWS):
            if today - timedelta(days=span - 1) <= day.day <= today:
                windows[index] += day.net
    views = []
    for (network, asset), windows in sorted(sums.items()):
        info = assets.get(asset)
        views.append(
            TotalView(
                network=network,
                asset=asset,
                asset_name=asset if info is None else info.name,
                amounts=tuple(money(amount, asset, assets) for amount in windows),
            )
        )
    return views


def payer_views(payers: Sequence[PayerTotal], assets: Mapping[str, AssetInfo]) -> list[PayerView]:
    """The ledger's payer totals as rows."""
    return [
        PayerView(
            payer=payer.payer,
            network=payer.network,
            count=payer.count,
            total=money(payer.total, payer.asset, assets),
            last_seen=format_time(payer.last_seen),
        )
        for payer in payers
    ]


def unpaid_views(attempts: Sequence[UnpaidAttempt], assets: Mapping[str, AssetInfo]) -> list[UnpaidView]:
    """The offers store's refused, failed and rejected payments as rows."""
    return [
        UnpaidView(
            task_id=attempt.task_id,
            skill=attempt.skill,
            state="refused" if attempt.state.value == "offered" else attempt.state.value,
            error=attempt.error or "-",
            reason=attempt.reason,
            payer=attempt.payer,
            network=attempt.network,
            amount=None
            if attempt.amount is None or attempt.asset is None
            else money(attempt.amount, attempt.asset, assets),
            at=format_time(attempt.at),
        )
        for attempt in attempts
    ]
