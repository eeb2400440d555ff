"""Settings: the relayer key as hex or a file path, a `.env` file under the environment, and a clear error
(from the settings and from `x402-facilitator`, without a traceback) for a missing key or a bad network."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from eth_account import Account
from pydantic import SecretStr, ValidationError

from a2a_x402.cli import ConfigError, load_settings
from a2a_x402.devchain import ANVIL_DEV_KEYS
from a2a_x402.facilitator import FacilitatorSettings
from a2a_x402.facilitator.cli import main

RELAYER_KEY = ANVIL_DEV_KEYS[1]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No X402_* variable from outside, and a working directory without a `.env` file."""
    for name in [name for name in os.environ if name.startswith("X402_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield


def test_the_relayer_key_is_read_from_a_file(tmp_path: Path) -> None:
    key_file = tmp_path / "relayer.key"
    key_file.write_text(RELAYER_KEY.removeprefix("0x") + "\n")

    settings = FacilitatorSettings(relayer_key=SecretStr(str(key_file)))

    assert settings.relayer_private_key() == RELAYER_KEY
    assert Account.from_key(settings.relayer_private_key()).address == Account.from_key(RELAYER_KEY).address


def test_a_key_file_without_a_key_is_refused_without_showing_its_content(tmp_path: Path) -> None:
    key_file = tmp_path / "relayer.key"
    key_file.write_text("not-a-key-but-a-secret\n")

    with pytest.raises(ValueError, match="does not hold a 32-byte hex private key") as refused:
        FacilitatorSettings(relayer_key=SecretStr(str(key_file))).relayer_private_key()
    assert "not-a-key-but-a-secret" not in str(refused.value)


def test_a_key_that_is_neither_hex_nor_a_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="32 bytes of hex or the path of a file"):
        FacilitatorSettings(relayer_key=SecretStr(str(tmp_path / "missing.key"))).relayer_private_key()


def test_a_dotenv_file_is_read_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text(
        "X402_NETWORK=eip155:31337\n"
        f"X402_RELAYER_KEY={RELAYER_KEY}\n"
        "X402_CONFIRMATIONS=3\n"
        "X402_GAS_LIMIT_CAP=500000\n"
    )
    monkeypatch.setenv("X402_CONFIRMATIONS", "2")

    settings = FacilitatorSettings()

    assert (settings.network, settings.chain_id) == ("eip155:31337", 31337)
    assert settings.relayer_private_key() == RELAYER_KEY
    assert (settings.confirmations, settings.gas_limit_cap) == (2, 500_000)


def test_a_missing_relayer_key_is_a_clear_error() -> None:
    settings = FacilitatorSettings()

    with pytest.raises(ValueError, match="X402_RELAYER_KEY is not set"):
        settings.relayer_private_key()
    served = CliRunner().invoke(main, ["serve"])
    assert served.exit_code == 2
    assert "X402_RELAYER_KEY is not set" in served.output
    assert "Traceback" not in served.output


@pytest.mark.parametrize(
    "network", ["base-sepolia", "eip155:", "eip155:0", "eip155:0x14a34", "solana:mainnet"]
)
def test_a_bad_network_is_a_clear_error(network: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X402_NETWORK", network)
    monkeypatch.setenv("X402_RELAYER_KEY", RELAYER_KEY)

    with pytest.raises(ValidationError, match="must be a CAIP-2 EVM chain id"):
        FacilitatorSettings()
    for command in (["serve"], ["db", "upgrade"]):
        answered = CliRunner().invoke(main, command)
        assert answered.exit_code == 2, answered.output
        assert "X402_NETWORK: " in answered.output and "CAIP-2 EVM chain id" in answered.output
        assert "Traceback" not in answered.output
    assert not (Path.cwd() / "x402.db").exists()  # nothing was created


def test_relayer_keys_are_read_comma_separated_or_from_a_file_and_join_the_single_key(tmp_path: Path) -> None:
    keys_file = tmp_path / "relayers.keys"
    keys_file.write_text(f"# the pool\n{ANVIL_DEV_KEYS[2]}\n\n{ANVIL_DEV_KEYS[3].removeprefix('0x')}\n")

    listed = FacilitatorSettings(relayer_keys=SecretStr(f"{ANVIL_DEV_KEYS[2]}, {ANVIL_DEV_KEYS[3]}"))
    from_file = FacilitatorSettings(
        relayer_key=SecretStr(RELAYER_KEY), relayer_keys=SecretStr(str(keys_file))
    )

    assert listed.relayer_private_keys() == [ANVIL_DEV_KEYS[2], ANVIL_DEV_KEYS[3]]
    assert from_file.relayer_private_keys() == [RELAYER_KEY, ANVIL_DEV_KEYS[2], ANVIL_DEV_KEYS[3]]


def test_a_relayer_key_named_twice_or_a_bad_keys_file_is_a_clear_error(tmp_path: Path) -> None:
    bad_file = tmp_path / "relayers.keys"
    bad_file.write_text(f"{ANVIL_DEV_KEYS[2]}\nnot a key\n")

    with pytest.raises(ValueError, match="names one key twice"):
        FacilitatorSettings(
            relayer_keys=SecretStr(f"{ANVIL_DEV_KEYS[2]},{ANVIL_DEV_KEYS[2]}")
        ).relayer_private_keys()
    with pytest.raises(ValueError, match="one 32-byte hex private key per line") as refused:
        FacilitatorSettings(relayer_keys=SecretStr(str(bad_file))).relayer_private_keys()
    assert ANVIL_DEV_KEYS[2].removeprefix("0x") not in str(refused.value)


def test_no_wallet_factory_is_listed_by_default() -> None:
    assert FacilitatorSettings().erc6492_factory_addresses == ()
    assert FacilitatorSettings(erc6492_factories=" , ").erc6492_factory_addresses == ()


def test_wallet_factories_are_read_comma_separated_checksummed_each_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = Account.create().address, Account.create().address
    monkeypatch.setenv(
        "X402_ERC6492_FACTORIES", f" {first.lower()}, ,{second},{first.upper().replace('X', 'x')},"
    )

    settings = FacilitatorSettings()

    assert settings.erc6492_factory_addresses == (first, second)
    assert settings.erc6492_factories == f"{first},{second}"


@pytest.mark.parametrize(
    ("listed", "says"),
    [
        ("0x1234", "'0x1234' is not an address"),
        ("wallet-factory", "'wallet-factory' is not an address"),
        (f"0x{'11' * 20};0x{'22' * 20}", "is not an address"),
        ("0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "wrong EIP-55 checksum (expected 0x5aAeb6053F3E"),
    ],
)
def test_a_wallet_factory_that_is_not_an_address_is_a_clear_error(listed: str, says: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(says)):
        FacilitatorSettings(erc6492_factories=listed)


def test_a_private_key_listed_as_a_wallet_factory_is_refused_without_showing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("X402_ERC6492_FACTORIES", f"0x{'11' * 20},{RELAYER_KEY}")

    with pytest.raises(ConfigError) as refused:
        load_settings(FacilitatorSettings)

    assert str(refused.value) == (
        "X402_ERC6492_FACTORIES: entry 2 is 32 bytes of hex (a private key?), not a 20-byte address"
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("X402_REVERT_COOLOFF_S", "-1"),
        ("X402_REVERT_COOLOFF_S", "1e9"),
        ("X402_REVERT_COOLOFF_CODE_PAYERS", "0"),
        ("X402_RELAYER_REVERT_BUDGET_WEI", "0"),
        ("X402_RELAYER_REVERT_BUDGET_WEI", str(2**256)),
    ],
)
def test_a_bad_revert_setting_is_a_one_line_mistake(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("X402_RELAYER_KEY", RELAYER_KEY)
    monkeypatch.setenv(variable, value)

    answered = CliRunner().invoke(main, ["serve"])

    assert answered.exit_code == 2, answered.output
    assert f"{variable}: " in answered.output and "Traceback" not in answered.output
    assert len(answered.output.strip().splitlines()) == 1
    assert not (Path.cwd() / "x402.db").exists()  # nothing was created
