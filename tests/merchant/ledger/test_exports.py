"""The ledger package's public surface: everything public is exported, sorted, and nothing else."""

from __future__ import annotations

import types

import a2a_x402.merchant.ledger as ledger
from tests.fixtures.exports import loaded_vars


def _isort_key(name: str) -> tuple[int, str]:
    # Constants, then classes, then functions, as ruff's RUF022 sorts `__all__`.
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in loaded_vars(ledger).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    } - {"annotations"}
    assert set(ledger.__all__) == public
    assert ledger.__all__ == sorted(ledger.__all__, key=_isort_key)


def test_every_module_declares_all() -> None:
    modules = [value for value in loaded_vars(ledger).values() if isinstance(value, types.ModuleType)]
    assert {module.__name__.rsplit(".", 1)[1] for module in modules} == {
        "_errors",
        "_ids",
        "_invariants",
        "_ledger",
        "_models",
        "_pg_booking",
        "_queries",
        "_records",
        "_sequence",
        "_statement",
        "_tallies",
        "cli",
    }
    for module in modules:
        assert module.__all__, module.__name__
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
