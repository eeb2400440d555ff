"""No import circles between the project's modules.

Every import counts, at module level or not, `TYPE_CHECKING` or not: a circle hidden in a function body or
behind a type-checking guard is still two modules that each need the other, and the layout in
docs/layout.md says who may know whom in one direction only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("a2a_x402", "bench", "spec")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The project modules that `name` imports: `from a.b import c` is a.b.c when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names]
            targets = [target if target in modules else base for target in targets]
        else:
            continue
        yield from (target for target in targets if target in modules and target != name)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set(_imports(name, path, modules)) for name, path in modules.items()}


def test_no_module_imports_itself_through_others() -> None:
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle_through_a_type_checking_import() -> None:
    # The check itself: the agentcard circle this test was written against, rebuilt by hand.
    graph = _graph()
    graph["a2a_x402.agentcard._result"] = graph["a2a_x402.agentcard._result"] | {"a2a_x402.agentcard._errors"}
    assert ["a2a_x402.agentcard._errors", "a2a_x402.agentcard._result"] in _circles(graph)


def test_relative_and_absolute_imports_are_both_read() -> None:
    graph = _graph()
    assert "a2a_x402.agentcard._result" in graph["a2a_x402.agentcard._errors"]  # `from ._result import ...`
    assert "a2a_x402.facilitator.wire" in graph["a2a_x402.facilitator._service"]  # `from .wire import ...`
    assert "a2a_x402.storage" in graph["a2a_x402.facilitator._service"]  # `from a2a_x402.storage import ...`
