"""The A2A x402 extension v0.3 specification: documents, examples, schemas, and the tool keeping them in step.

``v0.3.md`` is the specification; ``examples/`` holds each of its example blocks as a file and ``schema/``
the JSON Schemas of the extension's metadata values and card parameters. ``python -m spec.build`` keeps
the examples and the generated tables in step with the Markdown, with ``a2a_x402`` and with the conformance
kit (its check list, and its copy of the schemas) (``--check`` in CI).
"""

from __future__ import annotations

from ._markdown import (
    Example,
    SpecFormatError,
    generated_section,
    read_examples,
    render_example,
    replace_examples,
    replace_generated,
    section_anchors,
)
from ._tables import CATEGORY_TITLES, render_check_table, render_migration_table, render_reason_table

__all__ = [
    "CATEGORY_TITLES",
    "Example",
    "SpecFormatError",
    "generated_section",
    "read_examples",
    "render_check_table",
    "render_example",
    "render_migration_table",
    "render_reason_table",
    "replace_examples",
    "replace_generated",
    "section_anchors",
]
