"""The README's settings table against the code: every `X402_*` variable a command reads (a settings
class's field, or a name the sources spell out) is in it, and every default it states as a literal is
the code's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from a2a_x402.facilitator._config import FacilitatorSettings
from a2a_x402.merchant.callers.cli import CallerSettings
from a2a_x402.merchant.differences.cli import DifferenceSettings
from a2a_x402.merchant.ledger.cli import LedgerSettings
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.webhooks.cli import WebhookSettings
from a2a_x402.observability._logs import LogSettings
from tests.test_imports import PACKAGES

_ROOT = Path(__file__).resolve().parent.parent
_README = _ROOT / "README.md"
_CLASSES: tuple[type[BaseSettings], ...] = (
    FacilitatorSettings,
    MerchantSettings,
    CallerSettings,
    DifferenceSettings,
    LedgerSettings,
    WebhookSettings,
    LogSettings,
)
# Unset (None) in the code, and said in words for what that means.
_IN_WORDS = {"X402_RELAYER_MAX_KEYS": "all", "X402_PUBLIC_URL": "`http://HOST:PORT`"}
# One variable, a default per service.
_SERVICES = {"FacilitatorSettings": "facilitator", "MerchantSettings": "merchant"}


def _table() -> dict[str, str]:
    """Each variable of the table and the default stated for it (a row naming two splits on " / ")."""
    rows: dict[str, str] = {}
    for line in _README.read_text().splitlines():
        if not line.startswith("| `X402_"):
            continue
        names_cell, default_cell = (cell.strip() for cell in line.split("|")[1:3])
        names = re.findall(r"`(X402_[A-Z0-9_]+)`", names_cell)
        defaults = default_cell.split(" / ") if len(names) > 1 else [default_cell]
        assert len(defaults) == len(names), line
        rows.update(zip(names, defaults, strict=True))
    return rows


def _fields() -> list[tuple[str, str, Any]]:
    return [
        (cls.__name__, f"X402_{name.upper()}", field.default)
        for cls in _CLASSES
        for name, field in cls.model_fields.items()
    ]


def _stated(cell: str) -> str | None:
    """The literal a cell states (the backticked value before any explanation), None for "none"."""
    if cell.startswith("—"):
        return None
    found = re.match(r"`([^`]*)`", cell)
    return found.group(1) if found else cell


def _same(stated: str | None, default: Any) -> bool:
    if stated is None:
        return default in (None, "", PydanticUndefined)
    if isinstance(default, bool):
        return stated == str(default).lower()
    if isinstance(default, int | float):
        return float(stated) == float(default)
    return stated == str(default)


@pytest.mark.parametrize(("owner", "variable", "default"), _fields())
def test_every_setting_is_in_the_readme_table_with_the_codes_default(
    owner: str, variable: str, default: Any
) -> None:
    table = _table()
    assert variable in table, f"{owner} reads {variable}, which the README's settings table does not list"
    cell = table[variable]
    if variable in _IN_WORDS:
        assert (cell, default) == (_IN_WORDS[variable], None)
    elif variable == "X402_PORT":
        assert f"`{default}` ({_SERVICES[owner]})" in cell
    else:
        assert _same(_stated(cell), default), f"README: {variable} defaults to {cell!r}; {owner}: {default!r}"


def _spelled_out() -> set[str]:
    """The `X402_*` names the packages' sources spell out as strings (click envvars, `os.environ` reads)."""
    return {
        name
        for package in PACKAGES
        for source in (_ROOT / package).rglob("*.py")
        for name in re.findall(r'"(X402_[A-Z0-9_]+)"', source.read_text())
    }


def test_every_settings_class_of_the_packages_is_checked() -> None:
    # Read from the sources, not BaseSettings.__subclasses__(): what that finds depends on what else the
    # test process imported (a test's own settings class, say).
    defined = {
        name
        for package in PACKAGES
        for source in (_ROOT / package).rglob("*.py")
        for name in re.findall(r"^class (\w+)\(BaseSettings\):", source.read_text(), re.MULTILINE)
    }
    assert defined == {cls.__name__ for cls in _CLASSES}


def test_every_variable_the_sources_name_is_in_the_table() -> None:
    assert _spelled_out() - set(_table()) == set()


def test_every_variable_of_the_table_is_read_by_some_command() -> None:
    read = {variable for _, variable, _ in _fields()} | _spelled_out()
    assert set(_table()) <= read
