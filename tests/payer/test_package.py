"""The payer's public API and its place in the architecture: it never imports the merchant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from a2a_x402 import payer
from tests.fixtures.exports import loaded_vars


def test_all_is_sorted_and_is_the_public_surface() -> None:
    defined_here = {
        name
        for name, value in loaded_vars(payer).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("a2a_x402.payer")
    }

    assert payer.__all__ == sorted(payer.__all__)
    assert all(hasattr(payer, name) for name in payer.__all__)
    assert defined_here <= set(payer.__all__)


def test_payer_and_its_cli_never_import_the_merchant() -> None:
    code = (
        "import sys, a2a_x402.payer, a2a_x402.payer.cli; "
        "print(sorted(m for m in sys.modules if m.startswith('a2a_x402.merchant')))"
    )
    root = Path(payer.__file__).parents[2]
    command = [sys.executable, "-c", code]
    output = subprocess.run(command, capture_output=True, text=True, check=True, cwd=root)  # noqa: S603
    assert output.stdout.strip() == "[]"
