"""The kit's package: its public API, and the black-box rule (it never imports the merchant's side)."""

from __future__ import annotations

import ast
from pathlib import Path

from a2a_x402 import conformance

PACKAGE = Path(conformance.__file__).resolve().parent
# Project packages the kit may use: the wire contract, the x402 wire types, agentcard and the neutral
# observability (its words for a failure) (docs/layout.md).
ALLOWED_PROJECT = (
    "a2a_x402.extension",
    "a2a_x402.facilitator.wire",
    "a2a_x402.agentcard",
    "a2a_x402.observability",
)
PROJECT = frozenset({"a2a_x402", "bench", "spec"})


def test_all_lists_the_public_api() -> None:
    module = conformance
    defined_here = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith(module.__name__)
    }
    # Sorted as ruff sorts __all__: constants, then classes, then functions.
    assert module.__all__ == sorted(module.__all__, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    assert all(hasattr(module, name) for name in module.__all__)
    assert defined_here - {"cli"} <= set(module.__all__)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_the_kit_is_black_box() -> None:
    for path in PACKAGE.glob("*.py"):
        for name in _imports(path):
            if name.split(".")[0] in PROJECT and not name.startswith(f"{conformance.__name__}."):
                assert any(
                    name == allowed or name.startswith(f"{allowed}.") for allowed in ALLOWED_PROJECT
                ), f"{path.name} imports {name}: the kit may use only {ALLOWED_PROJECT} of the project"


def test_every_module_stays_small() -> None:
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in PACKAGE.glob("*.py")}
    assert max(sizes.values()) <= 450, sizes
