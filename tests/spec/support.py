"""Shared helpers of the specification tests: the spec's examples, its schemas, and walkers over A2A JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.types import SendMessageRequest, SendMessageResponse
from google.protobuf.json_format import ParseDict
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02, Dialect, decode, encode
from spec import Example, read_examples
from spec.build import SCHEMA_DIR, SPEC_PATH

JSON = dict[str, Any]


@cache
def spec_text() -> str:
    """The specification's Markdown."""
    return SPEC_PATH.read_text(encoding="utf-8")


def examples() -> list[Example]:
    """Every example block of the specification."""
    return read_examples(spec_text())


def example(name: str) -> Any:
    """The JSON document of the example named `name` (a fresh copy)."""
    for candidate in examples():
        if candidate.name == name:
            return candidate.document
    raise KeyError(f"the specification has no example {name}")


@cache
def _schemas() -> dict[str, JSON]:
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in SCHEMA_DIR.glob("*.json")}


def schema_names() -> list[str]:
    """The file names under `spec/schema/`."""
    return sorted(_schemas())


def _registry() -> Registry:
    return Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in _schemas().values()
    )


def validator(name: str) -> Draft202012Validator:
    """A validator for `spec/schema/<name>` that resolves references to the other schema files."""
    return Draft202012Validator(_schemas()[name], registry=_registry())


def definition_errors(name: str, definition: str, instance: Any) -> list[str]:
    """The validation errors of `instance` against `$defs/<definition>` of `spec/schema/<name>`."""
    reference = {"$ref": f"{_schemas()[name]['$id']}#/$defs/{definition}"}
    return [
        f"{list(error.absolute_path)}: {error.message}"
        for error in Draft202012Validator(reference, registry=_registry()).iter_errors(instance)
    ]


def schema_errors(name: str, instance: Any) -> list[str]:
    """The validation errors of `instance` against `spec/schema/<name>`, as readable lines."""
    return [
        f"{list(error.absolute_path)}: {error.message}" for error in validator(name).iter_errors(instance)
    ]


def messages(document: Any) -> Iterator[JSON]:
    """Every A2A Message in a JSON document: objects with `messageId`, `role` and `parts`."""
    if isinstance(document, dict):
        if {"messageId", "role", "parts"} <= document.keys():
            yield document
        for value in document.values():
            yield from messages(value)
    elif isinstance(document, list):
        for value in document:
            yield from messages(value)


def statuses(document: Any) -> Iterator[JSON]:
    """Every TaskStatus in a JSON document (the `status` member of a Task or a statusUpdate)."""
    if isinstance(document, dict):
        status = document.get("status")
        if isinstance(status, dict) and "state" in status:
            yield status
        for value in document.values():
            yield from statuses(value)
    elif isinstance(document, list):
        for value in document:
            yield from statuses(value)


def extension_object(message: JSON) -> JSON | None:
    """The extension object of a message, or None."""
    value = message.get("metadata", {}).get(EXTENSION_URI)
    return value if isinstance(value, dict) else None


def v0_2_form(document: JSON, role: str) -> JSON:
    """The A2A 0.3 / extension v0.2 form (§13) of a 1.0 `SendMessage` example with the `role` given.

    The A2A objects go through the a2a-sdk's own 0.3 conversion; the extension object of each message
    becomes the v0.2 flat keys by `a2a_x402.encode` of what `decode` reads from the 1.0 form, from the
    example's JSON itself (a detour through protobuf would turn its integers into floats).
    """
    if role == "request":
        request = ParseDict(document["params"], SendMessageRequest())
        converted = conversions.to_compat_send_message_request(request, document["id"])
        result: JSON = converted.model_dump(mode="json", by_alias=True, exclude_none=True)
    elif role == "response":
        task = ParseDict(document["result"], SendMessageResponse()).task
        dumped = conversions.to_compat_task(task).model_dump(mode="json", by_alias=True, exclude_none=True)
        result = {"jsonrpc": "2.0", "id": document["id"], "result": dumped}
    else:
        raise ValueError(f"no v0.2 form for a {role}")
    for original, message in zip(messages(document), messages(result), strict=True):
        value = decode(original.get("metadata", {}), Dialect.V03)
        if value is None:
            continue
        message["metadata"] = encode(value, Dialect.V02)
        message["extensions"] = [
            EXTENSION_URI_V02 if uri == EXTENSION_URI else uri for uri in message.get("extensions", [])
        ]
    return result
