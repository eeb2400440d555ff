"""The webhooks package's public surface: everything public is exported, sorted, and nothing else."""

from __future__ import annotations

import types

import a2a_x402.merchant.webhooks as webhooks
from tests.fixtures.exports import loaded_vars
from tests.merchant.ledger.test_exports import _isort_key


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in loaded_vars(webhooks).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    } - {"annotations"}
    assert set(webhooks.__all__) == public
    assert webhooks.__all__ == sorted(webhooks.__all__, key=_isort_key)


def test_every_module_declares_all() -> None:
    modules = [value for value in loaded_vars(webhooks).values() if isinstance(value, types.ModuleType)]
    assert {module.__name__.rsplit(".", 1)[1] for module in modules} == {
        "_backlog",
        "_delivery",
        "_endpoints",
        "_errors",
        "_events",
        "_ids",
        "_models",
        "_outbox",
        "_probe",
        "_retry",
        "_routes",
        "_sender",
        "_signing",
        "_ssrf",
        "cli",
    }
    for module in modules:
        assert module.__all__, module.__name__
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
