"""How the dashboard writes amounts and times: exact decimal strings from integer atomic units, UTC times.

Amounts never pass through a float: `format_amount` splits the integer with `divmod` by the power of ten
of the asset's decimals, so 2**256 - 1 atomic units show every digit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["AssetInfo", "Money", "format_amount", "format_time", "money"]


@dataclass(frozen=True, slots=True)
class AssetInfo:
    """What the dashboard knows of a token: its display name and its decimals."""

    name: str
    decimals: int


@dataclass(frozen=True, slots=True)
class Money:
    """An amount as the dashboard shows it: the atomic units, and the same formatted with the decimals
    (`text` and `unit`; an asset the merchant does not know is shown in atomic units only)."""

    atomic: int
    text: str
    unit: str


def format_amount(atomic: int, decimals: int) -> str:
    """`atomic` units written with `decimals` places and thousands separators: 1234500, 6 -> "1.234500"."""
    sign = "-" if atomic < 0 else ""
    whole, fraction = divmod(abs(atomic), 10**decimals)
    if decimals == 0:
        return f"{sign}{whole:,}"
    return f"{sign}{whole:,}.{fraction:0{decimals}d}"


def money(atomic: int, asset: str, assets: Mapping[str, AssetInfo]) -> Money:
    """`atomic` units of the token at address `asset`, formatted when the token is one of `assets`."""
    info = assets.get(asset)
    if info is None:
        return Money(atomic=atomic, text=f"{atomic:,}", unit="atomic units")
    return Money(atomic=atomic, text=format_amount(atomic, info.decimals), unit=info.name)


def format_time(value: datetime | None) -> str:
    """`value` in UTC to the second, e.g. `2026-12-01 12:00:00Z`; a dash for None."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
