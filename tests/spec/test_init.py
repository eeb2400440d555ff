from __future__ import annotations

import types

import spec


def _isort_key(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions, each alphabetical (ruff RUF022 / isort style)."""
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def test_all_lists_exactly_the_public_names_sorted() -> None:
    # Submodules (`spec.build`, once imported) are attributes of the package but not its API.
    public = {
        name
        for name, value in vars(spec).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, types.ModuleType)
    }
    assert set(spec.__all__) == public
    assert spec.__all__ == sorted(spec.__all__, key=_isort_key)
