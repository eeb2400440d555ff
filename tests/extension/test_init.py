from __future__ import annotations

import ast
import pathlib

from a2a_x402 import extension


def _isort_key(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions, each alphabetical (ruff RUF022 / isort style)."""
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def test_all_lists_exactly_the_public_names_sorted() -> None:
    public = {name for name in vars(extension) if not name.startswith("_") and name != "annotations"}
    assert set(extension.__all__) == public
    assert extension.__all__ == sorted(extension.__all__, key=_isort_key)


def test_the_package_imports_nothing_that_does_io() -> None:
    # Only facilitator.wire (pure) may be imported besides the standard library's pure modules, and
    # rfc8785 (pure canonical JSON, for the AP2 payload hash).
    allowed_roots = {
        "__future__",
        "base64",
        "collections",
        "dataclasses",
        "enum",
        "hashlib",
        "math",
        "re",
        "rfc8785",
        "types",
        "typing",
        "urllib",
    }
    for path in pathlib.Path(extension.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module is not None
                assert (
                    node.module == "a2a_x402.facilitator.wire" or node.module.split(".")[0] in allowed_roots
                ), (
                    path.name,
                    node.module,
                )
            elif isinstance(node, ast.Import):
                assert all(alias.name.split(".")[0] in allowed_roots for alias in node.names), path.name
