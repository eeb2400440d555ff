"""The settings reference, generated from the code at every build of the site.

Every pydantic-settings class of the packages (found in the sources, so a new one cannot be missed) gives
a table of its `X402_*` variables: type, bounds, default and the field's description. The variables the
sources read by name only (click `envvar`s, `os.environ`) get a table of where they are read. The page's
hand-written notes (`### ... {#anchor}` headings naming variables) are linked from the rows they explain;
a variable with neither a description nor a note, and a note about a variable nothing reads, are problems
the build reports (and `mkdocs build --strict` fails on).
"""

from __future__ import annotations

import importlib
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import SecretStr
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parent.parent
# Where `X402_*` names may be spelled out: the installed package and what runs it (benchmarks, spec tools).
SOURCES = ("a2a_x402", "bench", "spec")
MARKER = "<!-- settings-reference -->"
PREFIX = "X402_"

_CLASS = re.compile(r"^class (\w+)\(BaseSettings\):", re.MULTILINE)
_SPELLED = re.compile(r'"(X402_[A-Z0-9_]+)"')
_NOTE = re.compile(r"^### (?P<title>.+?) \{#(?P<anchor>[\w-]+)\}[ \t]*$", re.MULTILINE)
_VARIABLE = re.compile(r"`(X402_[A-Z0-9_]+)`")
_BOUNDS = (
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "≤"),
    (annotated_types.Lt, "lt", "<"),
)


@dataclass(frozen=True)
class Setting:
    """One `X402_*` variable as one settings class reads it."""

    variable: str
    type: str
    default: str
    description: str


def _python_files() -> Iterator[Path]:
    for source in SOURCES:
        yield from sorted((ROOT / source).rglob("*.py"))


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def settings_classes() -> list[type[BaseSettings]]:
    """Every `BaseSettings` class the sources define, in the order of their files."""
    found: list[type[BaseSettings]] = []
    for path in _python_files():
        for name in _CLASS.findall(path.read_text()):
            cls = getattr(importlib.import_module(_module(path)), name)
            assert issubclass(cls, BaseSettings), f"{path}: {name} is not a BaseSettings"
            found.append(cls)
    return found


def spelled_out() -> dict[str, list[str]]:
    """Each `X402_*` name the sources spell out as a string, with the files that do."""
    found: dict[str, list[str]] = {}
    for path in _python_files():
        for variable in sorted(set(_SPELLED.findall(path.read_text()))):
            found.setdefault(variable, []).append(path.relative_to(ROOT).as_posix())
    return found


def _type_name(annotation: Any) -> str:
    if annotation is SecretStr:
        return "secret"
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f'"{value}"' for value in typing.get_args(annotation))
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        return " \\| ".join(_type_name(arg) for arg in members)
    return str(getattr(annotation, "__name__", annotation))


def _number(value: float) -> str:
    # 2**256 written out is 78 digits no reader counts.
    if isinstance(value, int) and value > 2**32 and value.bit_count() == 1:
        return f"2^{value.bit_length() - 1}"
    return f"{value:,}"


def _bounds(metadata: list[Any]) -> str:
    found = [
        f"{sign} {_number(getattr(item, attribute))}"
        for item in metadata
        for kind, attribute, sign in _BOUNDS
        if isinstance(item, kind)
    ]
    return ", ".join(found)


def _default(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def settings_of(cls: type[BaseSettings]) -> list[Setting]:
    """The variables `cls` reads, as the page lists them."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    assert prefix == PREFIX, f"{cls.__name__} reads {prefix!r}-prefixed variables, not {PREFIX!r}"
    rows = []
    for name, field in cls.model_fields.items():
        kind = _type_name(field.annotation)
        bounds = _bounds(field.metadata)
        rows.append(
            Setting(
                variable=f"{PREFIX}{name.upper()}",
                type=f"{kind} ({bounds})" if bounds else kind,
                default=_default(field.default),
                description=(field.description or "").replace("|", "\\|"),
            )
        )
    return rows


def notes(markdown: str) -> dict[str, str]:
    """Each variable a note of the page explains, with that note's anchor."""
    return {
        variable: match["anchor"]
        for match in _NOTE.finditer(markdown)
        for variable in _VARIABLE.findall(match["title"])
    }


def _explained(description: str, anchor: str | None) -> str:
    more = f"[more](#{anchor})" if anchor else ""
    return f"{description} {more}".strip() if description else more


def render(markdown: str) -> tuple[str, list[str]]:
    """The generated tables for the page `markdown`, and the problems found on the way."""
    explained = notes(markdown)
    classes = settings_classes()
    problems: list[str] = []
    read: set[str] = set()
    lines: list[str] = []
    for cls in classes:
        summary = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        lines += [
            f"### `{cls.__name__}` {{#{cls.__name__}}}",
            "",
            f"`{cls.__module__}.{cls.__name__}`: {summary}",
            "",
            "| variable | type | default | meaning |",
            "| --- | --- | --- | --- |",
        ]
        for setting in settings_of(cls):
            read.add(setting.variable)
            anchor = explained.get(setting.variable)
            if not setting.description and anchor is None:
                problems.append(
                    f"{cls.__name__} reads {setting.variable}, which has no description and no note"
                )
            meaning = _explained(setting.description, anchor)
            lines.append(f"| `{setting.variable}` | {setting.type} | {setting.default} | {meaning} |")
        lines.append("")
    by_name = {variable: files for variable, files in spelled_out().items() if variable not in read}
    if by_name:
        lines += [
            "### Read by name {#read-by-name}",
            "",
            "Variables no settings class reads; the sources named here read them themselves.",
            "",
            "| variable | read in | meaning |",
            "| --- | --- | --- |",
        ]
        for variable, files in sorted(by_name.items()):
            anchor = explained.get(variable)
            if anchor is None:
                problems.append(f"{variable} is read in {', '.join(files)} and has no note on the page")
            where = ", ".join(f"`{file}`" for file in files)
            lines.append(f"| `{variable}` | {where} | {_explained('', anchor)} |")
        lines.append("")
    for variable in sorted(set(explained) - read - set(by_name)):
        problems.append(f"the note on {variable} explains a variable nothing reads")
    return "\n".join(lines), problems
