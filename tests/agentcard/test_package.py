from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from a2a_x402 import agentcard
from tests.fixtures.exports import loaded_vars


def test_all_is_sorted_and_is_the_public_surface() -> None:
    public = sorted(name for name in loaded_vars(agentcard) if not name.startswith("_"))
    assert agentcard.__all__ == sorted(agentcard.__all__)
    assert agentcard.__all__ == public


def test_private_modules_declare_all() -> None:
    for name in (
        "_canonical",
        "_errors",
        "_jwks",
        "_jws",
        "_keys",
        "_keystore",
        "_parse",
        "_readings",
        "_result",
        "_verify",
    ):
        module = importlib.import_module(f"a2a_x402.agentcard.{name}")
        assert set(module.__all__) <= set(agentcard.__all__), name


def test_imports_neither_side_nor_anything_but_the_sdk_types() -> None:
    # The project's packages by their name under `a2a_x402`, the libraries by their own.
    forbidden = {"merchant", "payer", "facilitator", "extension", "storage", "devchain", "web3", "jwt"}
    part = "m.split('.')[1] if m.startswith('a2a_x402.') else m.split('.')[0]"
    code = f"import sys, a2a_x402.agentcard; print(sorted({{{part} for m in sys.modules}} & {forbidden!r}))"
    root = Path(agentcard.__file__).parents[2]
    command = [sys.executable, "-c", code]
    output = subprocess.run(command, capture_output=True, text=True, check=True, cwd=root)  # noqa: S603
    assert output.stdout.strip() == "[]"
