"""MkDocs hooks of the site (`hooks:` in mkdocs.yml).

- The specification is read from `spec/`, where it lives and where `spec.build` keeps it in step with the
  code: its Markdown pages and JSON files join the site under `spec/` at every build, with a page listing
  the examples and one listing the schemas, so nothing of it is copied into `docs/`. The benchmarks' own
  README joins it the same way, under `bench/`.
- The settings reference's marker is replaced with the tables generated from the settings classes
  (`_settings_reference`); what that finds wrong is logged as a warning, which `--strict` fails on.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from _settings_reference import MARKER, ROOT, render
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

SPEC = ROOT / "spec"
BENCH = ROOT / "bench" / "README.md"
SETTINGS_PAGE = "reference/settings.md"
_FOLDER_LINK = re.compile(r"\]\((examples|schema)/\)")
_log = logging.getLogger("mkdocs.hooks.x402")


def _json_page(title: str, about: str, folder: Path) -> str:
    """A page showing every JSON file of `folder`, each under its name with a link to the file itself."""
    parts = [f"# {title}", "", about, ""]
    for path in sorted(folder.glob("*.json")):
        parts += [f"## `{path.name}`", "", f"[{path.name}]({path.name})", "", "```json"]
        parts += [path.read_text().rstrip("\n"), "```", ""]
    return "\n".join(parts)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Put the checkout first on the import path (the settings classes are imported from it)."""
    # The site documents this checkout's code, whatever copy of the package the environment has installed;
    # mkdocs restores the path after loading this module, so here rather than at its top.
    if sys.path[0] != str(ROOT):
        sys.path.insert(0, str(ROOT))
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add `spec/` (Markdown, JSON and the two listing pages) and `bench/README.md` to the site."""
    for path in sorted(SPEC.glob("*.md")) + sorted(SPEC.glob("*/*.json")) + [BENCH]:
        uri = path.relative_to(ROOT).as_posix()
        files.append(File(uri, str(ROOT), config.site_dir, config.use_directory_urls))
    examples = _json_page(
        "Examples",
        "Every example of the [specification](../v0.3.md), one JSON file each, named by scenario "
        "(generated from the specification's Markdown by `spec.build`).",
        SPEC / "examples",
    )
    schemas = _json_page(
        "JSON Schemas",
        "JSON Schema 2020-12 of the extension's metadata values, of the Agent Card declaration's "
        "`params` and of the x402 v2 documents they carry (see the [overview](../README.md)).",
        SPEC / "schema",
    )
    files.append(File.generated(config, "spec/examples/index.md", content=examples))
    files.append(File.generated(config, "spec/schema/index.md", content=schemas))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """The spec's folder links aimed at their listing pages; the settings page with its generated tables."""
    if page.file.src_uri.startswith("spec/"):
        # GitHub lists a folder; the site lists it on the folder's index page.
        return _FOLDER_LINK.sub(r"](\1/index.md)", markdown)
    if page.file.src_uri != SETTINGS_PAGE:
        return markdown
    if MARKER not in markdown:
        _log.warning("%s has lost its marker %s: no settings tables", SETTINGS_PAGE, MARKER)
        return markdown
    tables, problems = render(markdown)
    for problem in problems:
        _log.warning("settings reference: %s", problem)
    return markdown.replace(MARKER, tables)
