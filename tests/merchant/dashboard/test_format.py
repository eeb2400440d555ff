"""Amounts written from integer atomic units with the asset's decimals, exactly, at any size; hex values
shortened, and linked to the network's block explorer (built in, or the operator's)."""

from __future__ import annotations

import pytest

from a2a_x402.facilitator.wire import V1_NETWORK_CHAIN_IDS
from a2a_x402.merchant.dashboard import EXPLORERS, AssetInfo, Money, format_amount
from a2a_x402.merchant.dashboard._explorer import (
    explorer_url,
    explorers_for,
    hex_runs,
    is_local_chain,
    shorten,
)
from a2a_x402.merchant.dashboard._format import display_amount, money
from a2a_x402.merchant.dashboard._routes import templates_for

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

    assert money(2_500_000, USDC, assets) == Money(
        atomic=2_500_000, text="2.500000", unit="USDC", display="$2.50"
    )
    assert money(7, "0x808456652fdb597867f38412077A9182bf77359F", assets) == Money(
        atomic=7, text="7", unit="atomic units", display="7 atomic units"
    )


@pytest.mark.parametrize(
    ("atomic", "name", "decimals", "display"),
    [
        (10_000, "USDC", 6, "$0.01"),
        (100_000, "USDC", 6, "$0.10"),
        (10_001, "USDC", 6, "$0.010001"),
        (0, "USDC", 6, "$0.00"),
        (-10_000, "usdc", 6, "-$0.01"),
        (1_234_567_000_000, "USDT", 6, "$1,234,567.00"),
        (10**18, "DAI", 18, "$1.00"),
        (2**256 - 1, "USDC", 6, "$" + format((2**256 - 1) // 10**6, ",") + "." + str((2**256 - 1) % 10**6)),
        (10_000, "EURC", 6, "0.01 EURC"),
        (5, "WHOLE", 0, "5 WHOLE"),
        (5, "CENTS", 2, "0.05 CENTS"),
    ],
)
def test_amounts_read_as_people_write_them_with_a_dollar_for_usd_stablecoins(
    atomic: int, name: str, decimals: int, display: str
) -> None:
    assert display_amount(atomic, AssetInfo(name=name, decimals=decimals)) == display


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        ("0x" + "12" * 20, ("0x1212", "12" * 16, "1212")),
        ("0x" + "ab" * 32, ("0xabab", "ab" * 28, "abab")),
        ("0x1234", ("0x1234", "", "")),
    ],
)
def test_long_hex_values_are_shortened_to_head_and_tail(value: str, parts: tuple[str, str, str]) -> None:
    assert shorten(value) == parts
    assert "".join(parts) == value


def test_explorer_links_only_for_networks_with_a_known_explorer() -> None:
    tx = "0x" + "ab" * 32
    assert explorer_url("eip155:8453", "tx", tx) == f"https://basescan.org/tx/{tx}"
    assert explorer_url("eip155:84532", "address", USDC) == f"https://sepolia.basescan.org/address/{USDC}"
    assert explorer_url("eip155:1", "block", 7) == "https://etherscan.io/block/7"
    assert explorer_url("eip155:11155111", "token", USDC) == f"https://sepolia.etherscan.io/token/{USDC}"
    assert explorer_url("eip155:31337", "tx", tx) is None  # the dev chain
    assert explorer_url("eip155:8453", "javascript", tx) is None
    assert explorer_url("eip155:8453", "tx", "../x?y") == "https://basescan.org/tx/..%2Fx%3Fy"


# x402's networks without an EIP-3091 public explorer: peaq's Subscan names an address `/account/`, and
# Story's Iliad testnet (1513) is retired. An operator gives them one with X402_EXPLORERS.
_NO_EXPLORER = {"eip155:3338", "eip155:1513"}


def test_every_x402_network_with_a_public_explorer_links_to_its_pages_by_eip_3091_paths() -> None:
    tx, networks = "0x" + "cd" * 32, {f"eip155:{chain_id}" for chain_id in V1_NETWORK_CHAIN_IDS.values()}

    assert set(EXPLORERS) == (networks - _NO_EXPLORER) | {"eip155:11155111"}
    for network, base in EXPLORERS.items():
        assert base.startswith("https://") and not base.endswith("/"), network
        if "?" not in base:
            assert explorer_url(network, "tx", tx) == f"{base}/tx/{tx}"
            assert explorer_url(network, "address", USDC) == f"{base}/address/{USDC}"
    assert explorer_url("eip155:1328", "tx", tx) == f"https://seitrace.com/tx/{tx}?chain=atlantic-2"
    assert (
        explorer_url("eip155:1329", "address", USDC) == f"https://seitrace.com/address/{USDC}?chain=pacific-1"
    )
    assert explorer_url("eip155:43114", "block", 9) == "https://snowtrace.io/block/9"


def test_the_operators_explorers_add_to_or_replace_the_built_in_ones_and_a_dev_chain_gets_only_theirs() -> (
    None
):
    custom = {"eip155:8453": "https://base.blockscout.com/", "eip155:31337": "http://127.0.0.1:5100"}
    tx = "0x" + "ef" * 32

    public = explorers_for("https://mainnet.base.org", None, custom)
    dev = explorers_for("http://127.0.0.1:8545", None, custom)

    assert explorer_url("eip155:8453", "tx", tx, public) == f"https://base.blockscout.com/tx/{tx}"
    assert explorer_url("eip155:1", "tx", tx, public) == f"https://etherscan.io/tx/{tx}"
    assert dev == custom and explorer_url("eip155:84532", "tx", tx, dev) is None
    assert explorer_url("eip155:31337", "address", USDC, dev) == f"http://127.0.0.1:5100/address/{USDC}"


def test_a_chain_served_from_this_machine_is_a_dev_chain_without_explorer() -> None:
    assert is_local_chain("http://127.0.0.1:8545", None)
    assert is_local_chain("http://localhost:8545", "")
    assert is_local_chain("http://[::1]:8545", None)
    assert not is_local_chain("http://127.0.0.1:8545", "https://facilitator.example")
    assert not is_local_chain("https://sepolia.base.org", None)
    assert not is_local_chain("https://127.0.0.1.nip.io", None)
    assert explorer_url("eip155:84532", "tx", "0x01", {}) is None


def test_hex_values_link_to_the_explorer_of_a_known_network_and_escape_what_they_show() -> None:
    macros = templates_for(EXPLORERS).get_template("_macros.html").module
    tx = "0x" + "ab" * 32
    linked = str(macros.hexval(tx, "eip155:8453", "tx"))  # type: ignore[attr-defined]
    unknown = str(macros.hexval(tx, "eip155:31337", "tx"))  # type: ignore[attr-defined]
    dev = str(templates_for({}).get_template("_macros.html").module.hexval(tx, "eip155:84532", "tx"))  # type: ignore[attr-defined]
    hostile = str(macros.hexval('0x"><script>alert(1)</script>' + "0" * 30))  # type: ignore[attr-defined]

    assert f'href="https://basescan.org/tx/{tx}" rel="noopener noreferrer"' in linked
    assert f'title="{tx}">0xabab<span class="mid">{"ab" * 28}</span>abab</span>' in linked
    assert "href" not in unknown and "href" not in dev
    assert "<script>" not in hostile and "&lt;script&gt;" in hostile


def test_a_sentence_is_cut_into_runs_with_its_long_hex_values_apart() -> None:
    address, nonce = "0x" + "aB" * 20, "0x" + "0f" * 32
    text = f"{nonce}: 5 paid to {address} (nonce {nonce})"
    assert hex_runs(text) == [
        (nonce, True),
        (": 5 paid to ", False),
        (address, True),
        (" (nonce ", False),
        (nonce, True),
        (")", False),
    ]
    assert hex_runs("chain 0x1234 restarted") == [("chain 0x1234 restarted", False)]  # short: as it is
    assert hex_runs("") == []
