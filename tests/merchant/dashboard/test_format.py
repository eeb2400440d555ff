"""Amounts written from integer atomic units with the asset's decimals, exactly, at any size."""

from __future__ import annotations

import pytest

from merchant.dashboard import AssetInfo, Money, format_amount
from merchant.dashboard._format import money

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"


@pytest.mark.parametrize(
    ("atomic", "decimals", "text"),
    [
        (0, 6, "0.000000"),
        (1, 6, "0.000001"),
        (250_000, 6, "0.250000"),
        (1_234_567_890, 6, "1,234.567890"),
        (-5, 6, "-0.000005"),
        (42, 0, "42"),
        (10**18, 18, "1.000000000000000000"),
        (
            2**256 - 1,
            6,
            "115,792,089,237,316,195,423,570,985,008,687,907,853,269,984,665,640,564,039,457,584,007,913,129.639935",
        ),
    ],
)
def test_amounts_are_written_exactly(atomic: int, decimals: int, text: str) -> None:
    assert format_amount(atomic, decimals) == text


def test_a_known_asset_is_formatted_and_an_unknown_one_stays_in_atomic_units() -> None:
    assets = {USDC: AssetInfo(name="USDC", decimals=6)}

    assert money(2_500_000, USDC, assets) == Money(atomic=2_500_000, text="2.500000", unit="USDC")
    assert money(7, "0x808456652fdb597867f38412077A9182bf77359F", assets) == Money(
        atomic=7, text="7", unit="atomic units"
    )
