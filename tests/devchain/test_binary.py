"""Where anvil is found: ``X402_ANVIL_BIN`` first, then a checkout's pinned npm package (an installed wheel's
``PATH`` and its one-line advice run for real in tests/test_wheel.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2a_x402.devchain import AnvilNotFoundError
from a2a_x402.devchain._binary import ANVIL_VERSION, find_anvil

ROOT = Path(__file__).resolve().parents[2]


def test_the_version_the_advice_installs_is_the_one_package_json_pins() -> None:
    pins = json.loads((ROOT / "package.json").read_text())["dependencies"]
    locked = json.loads((ROOT / "package-lock.json").read_text())["packages"]

    assert pins["@foundry-rs/anvil"] == ANVIL_VERSION
    assert locked["node_modules/@foundry-rs/anvil"]["version"] == ANVIL_VERSION
    assert f"@foundry-rs/anvil@{ANVIL_VERSION}`" in (ROOT / "docs" / "reference" / "settings.md").read_text()


def test_a_checkout_runs_its_pinned_anvil_before_one_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "anvil"
    elsewhere.write_text("#!/bin/sh\nexit 1\n")
    elsewhere.chmod(0o755)
    monkeypatch.delenv("X402_ANVIL_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))

    found = find_anvil()

    assert found.is_relative_to(ROOT / "node_modules" / "@foundry-rs")
    assert found.name == "anvil"


def test_x402_anvil_bin_comes_first_and_must_be_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = tmp_path / "my-anvil"
    chosen.write_text("")
    monkeypatch.setenv("X402_ANVIL_BIN", str(chosen))
    assert find_anvil() == chosen

    monkeypatch.setenv("X402_ANVIL_BIN", str(tmp_path / "missing"))
    with pytest.raises(AnvilNotFoundError) as excinfo:
        find_anvil()
    assert str(excinfo.value) == f"X402_ANVIL_BIN={tmp_path / 'missing'} is not a file"
