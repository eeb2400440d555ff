"""The specification's JSON Schemas, as the kit validates answers against them.

The files in ``schema/`` are copies of ``spec/schema/`` that ``python -m spec.build`` keeps identical
(``--check`` fails when they differ), so the kit installs with the schemas of the specification it checks.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

__all__ = ["SCHEMA_DIR", "SCHEMA_FILES", "schema_problems"]

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
"""Where the kit's copies of the specification's schemas are."""
SCHEMA_FILES = (
    "ap2.json",
    "card-params.json",
    "common.json",
    "extension-object.json",
    "payment-completed.json",
    "payment-failed.json",
    "payment-rejected.json",
    "payment-required.json",
    "payment-submitted.json",
    "payment-verified.json",
    "x402-v2.json",
)
_MAX_PROBLEMS = 5


@cache
def _registry() -> tuple[dict[str, Any], Registry[Any]]:
    documents = {name: json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8")) for name in SCHEMA_FILES}
    registry: Registry[Any] = Registry().with_resources(
        (document["$id"], Resource.from_contents(document)) for document in documents.values()
    )
    return documents, registry


@cache
def _validator(name: str, definition: str) -> Draft202012Validator:
    documents, registry = _registry()
    document = documents[name]
    if definition:
        document = {"$ref": f"{document['$id']}#/$defs/{definition}"}
    return Draft202012Validator(document, registry=registry)


def schema_problems(name: str, instance: Any, definition: str = "") -> list[str]:
    """Why ``instance`` does not validate against schema ``name`` (or its ``$defs/definition``): at most a
    few reasons; empty: valid."""
    problems = []
    for error in _validator(name, definition).iter_errors(instance):
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        problems.append(f"{where}: {error.message[:200]}")
        if len(problems) == _MAX_PROBLEMS:
            break
    return problems
