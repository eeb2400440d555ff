"""The public API of `observability`: `__all__` sorted, complete and importable; it needs no other package of
the project (both services use it)."""

from __future__ import annotations

import ast
from pathlib import Path

from a2a_x402 import observability
from tests.fixtures.exports import loaded_vars

# Its own modules import each other relatively; any absolute import of the project is another package.
_PROJECT = {"a2a_x402", "bench", "spec"}


def test_all_lists_the_public_api() -> None:
    defined = {
        name
        for name, value in loaded_vars(observability).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("a2a_x402.observability")
    }

    assert observability.__all__ == sorted(observability.__all__, key=lambda n: (not n.isupper(), n))
    assert all(hasattr(observability, name) for name in observability.__all__)
    assert defined <= set(observability.__all__)


def test_it_imports_no_other_package_of_the_project() -> None:
    for path in Path(observability.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert node.module.split(".")[0] not in _PROJECT, (path.name, node.module)
            if isinstance(node, ast.Import):
                assert not {alias.name.split(".")[0] for alias in node.names} & _PROJECT, path.name
