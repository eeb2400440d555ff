"""The settings reference (docs/reference/settings.md, once the README's table) against the code: every
`X402_*` variable a command reads (a settings class's field, or a name the sources spell out) is on the
built page, in its class's table with the code's default, and every variable the page lists or explains
is read by some command. The page's tables are generated from the classes at build time; this checks what
the reader gets, and that the generator finds every class."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from a2a_x402.facilitator._config import FacilitatorSettings
from a2a_x402.merchant._ap2_keys_cli import Ap2KeySettings
from a2a_x402.merchant.callers.cli import CallerSettings
from a2a_x402.merchant.differences.cli import DifferenceSettings
from a2a_x402.merchant.ledger.cli import LedgerSettings
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.webhooks.cli import WebhookSettings
from a2a_x402.observability._logs import LogSettings
from tests.fixtures.docs import page_tables
from tests.test_imports import PACKAGES

_ROOT = Path(__file__).resolve().parent.parent
_NOTES = _ROOT / "docs" / "reference" / "settings.md"
_CLASSES: tuple[type[BaseSettings], ...] = (
    FacilitatorSettings,
    MerchantSettings,
    CallerSettings,
    DifferenceSettings,
    LedgerSettings,
    WebhookSettings,
    Ap2KeySettings,
    LogSettings,
)
# Unset (None) in the code, and said in words, in the variable's note, for what that means.
_IN_WORDS = {"X402_RELAYER_MAX_KEYS": "all", "X402_PUBLIC_URL": "`http://HOST:PORT`"}
# The generated tables' words for a field without a default, and for one whose default is unset or empty.
_REQUIRED, _UNSET = "required", "—"


@pytest.fixture(scope="module")
def page(built_site: Path) -> dict[tuple[str, str], str]:
    """Each (settings class, variable) row of the built page, with the default it states."""
    tables = page_tables((built_site / "reference" / "settings" / "index.html").read_text())
    return {
        (table.section, row[0]): row[2]
        for table in tables
        if table.section.endswith("Settings")
        for row in table.rows
    }


@pytest.fixture(scope="module")
def listed(built_site: Path) -> set[str]:
    """Every variable the built page lists in a table (the classes' and the one of names read by name)."""
    tables = page_tables((built_site / "reference" / "settings" / "index.html").read_text())
    return {row[0] for table in tables for row in table.rows if row and row[0].startswith("X402_")}


def _fields() -> list[tuple[str, str, Any]]:
    return [
        (cls.__name__, f"X402_{name.upper()}", field.default)
        for cls in _CLASSES
        for name, field in cls.model_fields.items()
    ]


def _stated(cell: str) -> str | None:
    """The literal a cell states, None for unset."""
    return None if cell == _UNSET else cell


def _same(stated: str | None, default: Any) -> bool:
    if default is PydanticUndefined:
        return stated == _REQUIRED
    if stated is None:
        return default in (None, "")
    if isinstance(default, bool):
        return stated == str(default).lower()
    if isinstance(default, int | float):
        return float(stated) == float(default)
    return stated == str(default)


@pytest.mark.parametrize(("owner", "variable", "default"), _fields())
def test_every_setting_is_in_the_settings_page_with_the_codes_default(
    page: dict[tuple[str, str], str], owner: str, variable: str, default: Any
) -> None:
    assert (owner, variable) in page, f"{owner} reads {variable}, which its table on the page does not list"
    cell = page[owner, variable]
    assert _same(_stated(cell), default), f"the page: {variable} defaults to {cell!r}; {owner}: {default!r}"


@pytest.mark.parametrize(("variable", "words"), sorted(_IN_WORDS.items()))
def test_a_default_said_in_words_is_the_codes_unset(variable: str, words: str) -> None:
    note = re.search(rf"^### `{variable}`.*?\n\nDefault (.+?); read by", _NOTES.read_text(), re.MULTILINE)
    assert note, f"the settings page has no note on {variable}"
    assert note[1] == words
    assert {default for _, name, default in _fields() if name == variable} == {None}


def _spelled_out() -> set[str]:
    """The `X402_*` names the packages' sources spell out as strings (click envvars, `os.environ` reads)."""
    return {
        name
        for package in PACKAGES
        for source in (_ROOT / package).rglob("*.py")
        for name in re.findall(r'"(X402_[A-Z0-9_]+)"', source.read_text())
    }


def test_every_settings_class_of_the_packages_is_checked(page: dict[tuple[str, str], str]) -> None:
    # Read from the sources, not BaseSettings.__subclasses__(): what that finds depends on what else the
    # test process imported (a test's own settings class, say).
    defined = {
        name
        for package in PACKAGES
        for source in (_ROOT / package).rglob("*.py")
        for name in re.findall(r"^class (\w+)\(BaseSettings\):", source.read_text(), re.MULTILINE)
    }
    assert defined == {cls.__name__ for cls in _CLASSES}
    assert {owner for owner, _ in page} == defined  # a table on the page for each, generated


def test_every_variable_the_sources_name_is_in_the_page(listed: set[str]) -> None:
    assert _spelled_out() - listed == set()


def test_every_variable_of_the_page_is_read_by_some_command(listed: set[str]) -> None:
    read = {variable for _, variable, _ in _fields()} | _spelled_out()
    explained = set(re.findall(r"^### .*?`(X402_[A-Z0-9_]+)`", _NOTES.read_text(), re.MULTILINE))
    assert listed <= read
    assert explained <= read
