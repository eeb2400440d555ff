"""Where the anvil executable is: ``X402_ANVIL_BIN``, a checkout's pinned npm package, or ``PATH``.

A checkout has anvil from the pinned npm package ``@foundry-rs/anvil`` in its ``node_modules``
(``scripts/setup``). An installed wheel has no ``node_modules`` beside it, so it runs the anvil on
``PATH`` (Foundry's, or the same npm package installed globally), and says in one line how to get one.
"""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

from ._errors import AnvilNotFoundError

__all__ = ["ANVIL_VERSION", "find_anvil"]

# The version package.json pins (tests/devchain/test_binary.py holds them equal): what the advice installs.
ANVIL_VERSION = "1.7.1"

# In a checkout, the folder holding package.json and node_modules; in an installed wheel, site-packages.
_ROOT = Path(__file__).resolve().parents[2]
# npm installs only the optional dependency matching the platform (see @foundry-rs/anvil's const.mjs).
_PLATFORM_PACKAGES = {
    ("Linux", "x86_64"): "anvil-linux-amd64",
    ("Linux", "aarch64"): "anvil-linux-arm64",
    ("Darwin", "x86_64"): "anvil-darwin-amd64",
    ("Darwin", "arm64"): "anvil-darwin-arm64",
}


def find_anvil() -> Path:
    """The anvil to run: ``X402_ANVIL_BIN``, else the checkout's pinned one, else the one on ``PATH``.

    Raises:
        AnvilNotFoundError: none of them is there; its message says how to get one, in one line.
    """
    override = os.environ.get("X402_ANVIL_BIN")
    if override:
        path = Path(override)
        if not path.is_file():
            raise AnvilNotFoundError(f"X402_ANVIL_BIN={override} is not a file")
        return path
    package = _PLATFORM_PACKAGES.get((platform.system(), platform.machine()))
    if package is not None:
        pinned = _ROOT / "node_modules" / "@foundry-rs" / package / "bin" / "anvil"
        if pinned.is_file():
            return pinned
    on_path = shutil.which("anvil")
    if on_path is not None:
        return Path(on_path)
    if package is None:
        raise AnvilNotFoundError(
            f"no pinned anvil build for {platform.system()} {platform.machine()}: put anvil on PATH "
            "(Foundry's foundryup) or set X402_ANVIL_BIN"
        )
    if (_ROOT / "package.json").is_file():
        raise AnvilNotFoundError(
            f"anvil not found: run ./scripts/setup in {_ROOT} (the pinned @foundry-rs/anvil), "
            "put anvil on PATH, or set X402_ANVIL_BIN"
        )
    raise AnvilNotFoundError(
        f"anvil not found on PATH: install it with `npm install -g @foundry-rs/anvil@{ANVIL_VERSION}` "
        "(or Foundry's foundryup), or set X402_ANVIL_BIN to its path"
    )
