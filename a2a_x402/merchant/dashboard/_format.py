"""How the dashboard writes amounts and times: exact decimal strings from integer atomic units, UTC times.

Amounts never pass through a float: `format_amount` splits the integer with `divmod` by the power of ten
of the asset's decimals, so 2**256 - 1 atomic units show every digit. `Money.display` is the form people
read: `$0.01` for a USD stablecoin (known by its symbol, `X402_ASSET_NAME`), `0.01 EURC` for another
token, trailing zeros beyond the cents dropped but never a significant digit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["USD_STABLECOINS", "AssetInfo", "Money", "display_amount", "format_amount", "format_time", "money"]

USD_STABLECOINS = frozenset(
    {"USDC", "USDT", "DAI", "PYUSD", "USDBC", "USDP", "GUSD", "TUSD", "FDUSD", "USDS"}
)
"""Symbols (upper-cased) of tokens pegged to the US dollar: their amounts are written with a `$`."""


@dataclass(frozen=True, slots=True)
class AssetInfo:
    """What the dashboard knows of a token: its display name and its decimals."""

    name: str
    decimals: int


@dataclass(frozen=True, slots=True)
class Money:
    """An amount as the dashboard shows it: the atomic units, and the same formatted with the decimals
    (`text` and `unit`; an asset the merchant does not know is shown in atomic units only), and the form a
    person reads (`display`, e.g. `$0.01`)."""

    atomic: int
    text: str
    unit: str
    display: str


def format_amount(atomic: int, decimals: int) -> str:
    """`atomic` units written with `decimals` places and thousands separators: 1234500, 6 -> "1.234500"."""
    sign = "-" if atomic < 0 else ""
    whole, fraction = divmod(abs(atomic), 10**decimals)
    if decimals == 0:
        return f"{sign}{whole:,}"
    return f"{sign}{whole:,}.{fraction:0{decimals}d}"


def display_amount(atomic: int, info: AssetInfo) -> str:
    """`atomic` units as people read them: `$0.01` for a USD stablecoin, `0.01 EURC` for another token.

    Exact: at least two decimals (cents), more only where a digit is not zero (10001 at 6 decimals is
    `$0.010001`)."""
    text = format_amount(abs(atomic), info.decimals)
    if info.decimals > 2:
        whole, _, fraction = text.partition(".")
        text = f"{whole}.{fraction.rstrip('0').ljust(2, '0')}"
    sign = "-" if atomic < 0 else ""
    if info.name.upper() in USD_STABLECOINS:
        return f"{sign}${text}"
    return f"{sign}{text} {info.name}"


def money(atomic: int, asset: str, assets: Mapping[str, AssetInfo]) -> Money:
    """`atomic` units of the token at address `asset`, formatted when the token is one of `assets`."""
    info = assets.get(asset)
    if info is None:
        text = f"{atomic:,}"
        return Money(atomic=atomic, text=text, unit="atomic units", display=f"{text} atomic units")
    return Money(
        atomic=atomic,
        text=format_amount(atomic, info.decimals),
        unit=info.name,
        display=display_amount(atomic, info),
    )


def format_time(value: datetime | None) -> str:
    """`value` in UTC to the second, e.g. `2026-12-01 12:00:00Z`; a dash for None."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
