"""Every name a user imports first (the `__all__` of `a2a_x402`, `a2a_x402.merchant` and `a2a_x402.payer`)
is documented: a class or function by a docstring of its own, a constant or type alias by the string
literal after its assignment (the form mkdocstrings reads), found where the name is defined."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

PACKAGES = ("a2a_x402", "a2a_x402.merchant", "a2a_x402.payer")


def _source_module(package: ModuleType, name: str) -> ModuleType:
    """The module that defines the constant `name`, followed from `package` through its imports."""
    tree = ast.parse(Path(str(package.__file__)).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == name for alias in node.names):
            target = importlib.import_module("." * node.level + (node.module or ""), package.__name__)
            return _source_module(target, name) if str(target.__file__).endswith("__init__.py") else target
    return package


def _attribute_docstring(module: ModuleType, name: str) -> str | None:
    """The string literal right after `name`'s module-level assignment in `module`, if any."""
    body = ast.parse(Path(str(module.__file__)).read_text()).body
    for statement, following in zip(body, body[1:], strict=False):
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else [statement.target]
            if isinstance(statement, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                return str(following.value.value)
            return None
    return None


def _exports() -> list[tuple[str, str]]:
    return [(package, name) for package in PACKAGES for name in importlib.import_module(package).__all__]


@pytest.mark.parametrize(("package", "name"), _exports())
def test_every_exported_name_is_documented(package: str, name: str) -> None:
    module = importlib.import_module(package)
    value = getattr(module, name)

    if inspect.isclass(value) or inspect.isfunction(value):
        # Read from the source: a dataclass without a docstring gets its signature as `__doc__`.
        defined = ast.parse(inspect.getsource(inspect.getmodule(value) or module))
        [definition] = [
            node
            for node in defined.body
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name == value.__name__
        ]
        own = ast.get_docstring(definition)
        assert own and own.strip(), f"{package}.{name} has no docstring"
    else:
        documented = _attribute_docstring(_source_module(module, name), name)
        assert documented and documented.strip(), f"{package}.{name} has no docstring after its assignment"


@pytest.mark.parametrize("package", PACKAGES)
def test_all_is_sorted(package: str) -> None:
    exported = importlib.import_module(package).__all__

    assert exported == sorted(exported)
