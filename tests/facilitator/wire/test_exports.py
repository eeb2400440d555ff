"""The package's public surface: everything public is exported, in isort order, and nothing else."""

from __future__ import annotations

import a2a_x402.facilitator.wire as wire


def _isort_key(name: str) -> tuple[int, str]:
    # Constants, then classes, then functions, as ruff's RUF022 sorts `__all__`.
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


def test_all_is_sorted_and_complete() -> None:
    public = {name for name in vars(wire) if not name.startswith("_")} - {"annotations"}
    assert set(wire.__all__) == public
    assert wire.__all__ == sorted(wire.__all__, key=_isort_key)


def test_every_private_module_declares_all() -> None:
    for module in (
        wire._api,
        wire._base,
        wire._convert,
        wire._errors,
        wire._networks,
        wire._parse,
        wire._permit2,
        wire._primitives,
        wire._reasons,
        wire._signer,
        wire._v1,
        wire._v2,
    ):
        assert module.__all__, module.__name__
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
