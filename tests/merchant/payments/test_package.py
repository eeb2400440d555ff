"""The public API of the payment layer: `__all__` sorted, complete and importable."""

from __future__ import annotations

from a2a_x402.merchant import payments
from tests.fixtures.exports import loaded_vars


def test_all_lists_the_public_api() -> None:
    module = payments
    defined_here = {
        name
        for name, value in loaded_vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith(module.__name__)
    }

    assert module.__all__ == sorted(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)
    assert defined_here <= set(module.__all__)
