"""Every console script the package installs answers `--version` with the installed package's version."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

SCRIPTS = (
    "x402-a2a-conformance",
    "x402-demo",
    "x402-devchain",
    "x402-facilitator",
    "x402-merchant",
    "x402-pay",
)


def test_every_console_script_is_listed_here() -> None:
    installed = {
        entry.name
        for entry in distribution("a2a-x402-merchant").entry_points
        if entry.group == "console_scripts"
    }
    assert installed == set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_version(script: str, tmp_path: Path) -> None:
    answered = subprocess.run(  # noqa: S603 - the project's own console scripts
        [str(Path(sys.executable).with_name(script)), "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert (answered.returncode, answered.stderr) == (0, "")
    assert answered.stdout == f"{script}, version {distribution('a2a-x402-merchant').version}\n"
