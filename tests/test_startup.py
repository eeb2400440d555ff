"""What a command starts: its module imports what it uses, not the whole project (counted in modules, not
timed), and the packages that export their names on first use (PEP 562) export every name of `__all__`."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

# The heavy parts a command that does not serve or pay has no use for: the A2A and HTTP apps, the gRPC
# server, the signing and key libraries, the facilitator's service, the merchant's composition root.
_HEAVY = (
    "fastapi",
    "grpc",
    "eth_account",
    "py_ecc",
    "aiohttp",
    "a2a_x402.facilitator._app",
    "a2a_x402.merchant.app",
    "a2a_x402.merchant.paid",
)

_LAZY_PACKAGES = (
    "a2a_x402",
    "a2a_x402.merchant",
    "a2a_x402.agentcard",
    "a2a_x402.cli",
    "a2a_x402.facilitator",
    "a2a_x402.merchant.callers",
    "a2a_x402.merchant.differences",
    "a2a_x402.merchant.edge",
    "a2a_x402.merchant.ledger",
    "a2a_x402.merchant.payments",
    "a2a_x402.merchant.webhooks",
    "a2a_x402.observability",
    "a2a_x402.payer",
    "a2a_x402.storage",
)


def _imported_by(module: str) -> set[str]:
    """The modules a fresh interpreter holds after importing `module`."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    ran = subprocess.run(  # noqa: S603 - a fixed script
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(ran.stdout))


@pytest.mark.parametrize(
    "module",
    [
        "a2a_x402.merchant.cli",
        "a2a_x402.merchant.callers.cli",
        "a2a_x402.merchant.differences.cli",
        "a2a_x402.merchant.ledger.cli",
        "a2a_x402.merchant.webhooks.cli",
        "a2a_x402.facilitator.cli",
        "a2a_x402.facilitator.wire",
        "a2a_x402",
        "a2a_x402.merchant",
    ],
)
def test_a_command_module_imports_none_of_the_heavy_parts(module: str) -> None:
    imported = _imported_by(module)

    assert sorted(name for name in _HEAVY if name in imported) == []


def test_the_payers_command_imports_no_signing_library_before_it_pays() -> None:
    assert "eth_account" not in _imported_by("a2a_x402.payer.cli")


@pytest.mark.parametrize("name", _LAZY_PACKAGES)
def test_a_lazy_package_exports_every_name_of_all(name: str) -> None:
    package = importlib.import_module(name)

    assert all(getattr(package, export) is not None for export in package.__all__)
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match="attribute not_exported"):
        package.not_exported  # noqa: B018 - the attribute read is the test
