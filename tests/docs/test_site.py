"""The documentation site, built strictly: every public name of the documented packages is in the API
reference, every `X402_*` variable of the settings classes in the settings reference, and the
specification's pages, examples and schemas are served from `spec/`. The settings generator refuses a
variable nobody explains."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic_settings import BaseSettings

from tests.fixtures.docs import ROOT, page_ids, page_tables

# The packages whose `__all__` is the public API the reference documents (docs/reference/api.md).
DOCUMENTED = (
    "a2a_x402",
    "a2a_x402.merchant",
    "a2a_x402.payer",
    "a2a_x402.facilitator",
    "a2a_x402.extension",
    "a2a_x402.agentcard",
    "a2a_x402.conformance",
)
_API_PAGE = ROOT / "docs" / "reference" / "api.md"


def _generator() -> ModuleType:
    """docs/_settings_reference.py, which the site's hook runs (docs/ is no package)."""
    path = ROOT / "docs" / "_settings_reference.py"
    spec = importlib.util.spec_from_file_location("_settings_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_api_page_documents_exactly_these_packages() -> None:
    assert tuple(re.findall(r"^::: ([\w.]+)$", _API_PAGE.read_text(), re.MULTILINE)) == DOCUMENTED


@pytest.mark.parametrize("package", DOCUMENTED)
def test_every_public_name_is_in_the_api_reference(built_site: Path, package: str) -> None:
    ids = page_ids((built_site / "reference" / "api" / "index.html").read_text())
    public: list[str] = list(getattr(importlib.import_module(package), "__all__", []))

    assert package in ids
    assert [name for name in public if f"{package}.{name}" not in ids] == []


def test_every_setting_of_the_settings_classes_is_in_the_settings_page(built_site: Path) -> None:
    tables = page_tables((built_site / "reference" / "settings" / "index.html").read_text())
    listed = {(table.section, row[0]) for table in tables for row in table.rows}
    classes: list[type[BaseSettings]] = _generator().settings_classes()

    assert len(classes) >= 7  # facilitator, merchant, its four commands, logs
    for cls in classes:
        for name in cls.model_fields:
            assert (cls.__name__, f"X402_{name.upper()}") in listed, f"{cls.__name__}.{name}"


def test_the_settings_generator_reports_a_variable_nobody_explains() -> None:
    # Without the page's notes, the variables whose fields carry no description are problems the build
    # fails on; and a note about a variable nothing reads is one too.
    _, problems = _generator().render("### `X402_NOT_READ_BY_ANYTHING` {#x}\n")

    assert any("X402_HOST" in problem and "no description" in problem for problem in problems)
    assert any("X402_PAYER_KEYS" in problem and "no note" in problem for problem in problems)
    assert any("X402_NOT_READ_BY_ANYTHING" in problem for problem in problems)


def test_the_specification_is_served_from_spec(built_site: Path) -> None:
    spec = ROOT / "spec"
    site = built_site / "spec"
    page = (site / "v0.3" / "index.html").read_text()

    assert (site / "index.html").is_file()  # spec/README.md
    assert "A2A x402" in page
    for folder in ("examples", "schema"):
        listing = (site / folder / "index.html").read_text()
        for source in sorted((spec / folder).glob("*.json")):
            assert json.loads((site / folder / source.name).read_text()) == json.loads(source.read_text())
            assert f"<code>{source.name}</code>" in listing, source.name
    # The spec's folder links lead to the listing pages, not to GitHub's folder views.
    assert 'href="../examples/"' in page and 'href="../schema/"' in page
