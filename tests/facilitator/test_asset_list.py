"""`X402_ASSETS` is read strictly: addresses (checksummed, each once) optionally with `:name:version`; a
mistake is one line naming the entry, never showing something shaped like a private key."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from a2a_x402.facilitator import FacilitatorSettings
from a2a_x402.facilitator._asset_list import AssetEntry, asset_entries, format_asset_entries

USDC = "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48"
OTHER = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"


def test_addresses_alone_and_with_a_domain() -> None:
    entries = asset_entries(f" {USDC.lower()}:USD Coin:2 , ,{OTHER}")

    assert entries == (AssetEntry(USDC, "USD Coin", "2"), AssetEntry(OTHER))
    assert format_asset_entries(entries) == f"{USDC}:USD Coin:2,{OTHER}"


def test_a_name_may_hold_a_colon_the_version_follows_the_last() -> None:
    assert asset_entries(f"{USDC}:Bridged: USDC:2") == (AssetEntry(USDC, "Bridged: USDC", "2"),)


def test_empty_lists_none() -> None:
    assert asset_entries("") == ()
    assert asset_entries(" , ") == ()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0x1234", "entry 1 does not start with a token address"),
        (f"{USDC},usdc", "entry 2 does not start with a token address"),
        (f"{USDC}:USD Coin", "entry 1 names a domain without both a name and a version"),
        (f"{USDC}::2", "entry 1 names a domain without both a name and a version"),
        (f"{USDC}:USD Coin:", "entry 1 names a domain without both a name and a version"),
        (f"{USDC},{USDC.lower()}:USDC:2", f"{USDC} is listed twice"),
        (OTHER.replace("Aeb", "aeb"), f"has a wrong EIP-55 checksum (expected {OTHER})"),
        (f"{USDC}:{'n' * 200}:2", "entry 1's name and version are longer than 128 characters"),
        (",".join([USDC] * 65), "is listed twice"),
    ],
)
def test_mistakes_are_refused_naming_the_entry(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        asset_entries(value)


def test_a_private_key_is_refused_without_being_shown() -> None:
    key = "0x" + "ab" * 32

    with pytest.raises(ValueError, match="entry 2 is 32 bytes of hex") as refused:
        asset_entries(f"{USDC},{key}:USDC:2")

    assert "ab" * 32 not in str(refused.value)


def test_an_oversized_list_is_refused_early() -> None:
    with pytest.raises(ValueError, match="lists more than 64 tokens"):
        asset_entries(",".join(f"0x{i:040x}" for i in range(10_000)))


def test_the_setting_is_normalised_and_listed() -> None:
    settings = FacilitatorSettings(assets=f"{USDC.lower()}:USD Coin:2")

    assert settings.assets == f"{USDC}:USD Coin:2"
    assert settings.asset_list == (AssetEntry(USDC, "USD Coin", "2"),)
    with pytest.raises(ValidationError, match="does not start with a token address"):
        FacilitatorSettings(assets="nope")
