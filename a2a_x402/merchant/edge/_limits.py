"""The bounds of one A2A request, and the check of a parsed request's shape against them.

A request's size is bounded before it is read (`_bounded`, gRPC's message size); what is inside it is bounded
here, before the SDK turns it into protobuf and the handlers see it: how many parts a message has, and how
large and how deep any free-form JSON is: every `metadata` object and every data part's `data`, which the
SDK converts into a protobuf `Struct` key by key and stores whole (60,000 keys in 1 MiB take a third of a
second to convert alone). One check serves every binding and version: over the JSON of a JSON-RPC or
HTTP+JSON body (1.0 and 0.3 both name them `parts`, `metadata` and `data`), and over the protobuf message
of a gRPC call.

Why these defaults: a paid request of the reference skill is one text part and a payment payload of about
2 KiB of metadata; 1 MiB of body is 500 of those, and parses in milliseconds. 64 parts and 64 KiB of
metadata (or data in one part), 16 levels deep, leave room for any real message (files go by URL, or
within the body limit)
while a body at the limit is refused before the SDK spends seconds converting 100,000 one-character parts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value

__all__ = ["RequestLimits", "json_shape_problem", "proto_shape_problem"]

_MIB = 1024 * 1024
# The free-form JSON of a request: metadata (request, message, part) and a data part's data.
_FREE_FORM = frozenset({"metadata", "data"})


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """How large and slow one request may be, and how long a gRPC connection carrying them may stay open and
    how many calls at once (each in docs/reference/settings.md; gRPC's: `_grpc_options`)."""

    max_body_bytes: int = _MIB
    max_parts: int = 64
    max_metadata_bytes: int = 64 * 1024
    max_metadata_depth: int = 16
    max_header_count: int = 100
    max_header_bytes: int = 16 * 1024
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    grpc_max_concurrent_streams: int = 100
    grpc_max_connection_idle_s: float = 300.0
    grpc_max_connection_age_s: float = 3600.0
    grpc_max_connection_age_grace_s: float = 60.0


def _json_depth(value: Any, limit: int) -> int:
    """Nesting depth of `value` (a scalar is 0), counting no further than `limit` + 1."""
    stack = [(value, 0)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _metadata_problem(where: str, metadata: Any, limits: RequestLimits) -> str | None:
    if _json_depth(metadata, limits.max_metadata_depth) > limits.max_metadata_depth:
        return f"{where} is nested deeper than {limits.max_metadata_depth} levels"
    size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limits.max_metadata_bytes:
        return f"{where} is {size} bytes, over the limit of {limits.max_metadata_bytes}"
    return None


def json_shape_problem(body: Any, limits: RequestLimits) -> str | None:
    """What in a parsed JSON request body is over `limits` (one line), or None when nothing is.

    Every `parts` array and every `metadata` or `data` object anywhere in the body is checked, so the JSON-RPC
    envelope (`params.message`), the HTTP+JSON body (`message`) and both versions are covered alike.
    """
    # Only containers can hold parts or metadata, so only they are walked into: a long list of scalars
    # costs one pass.
    stack: list[tuple[Any, str]] = [(body, "request")] if isinstance(body, dict | list) else []
    while stack:
        item, where = stack.pop()
        if isinstance(item, list):
            containers = (i for i, child in enumerate(item) if isinstance(child, dict | list))
            stack.extend((item[i], f"{where}[{i}]") for i in containers)
            continue
        for key, value in item.items():
            if not isinstance(value, dict | list):
                continue
            if key == "parts" and isinstance(value, list) and len(value) > limits.max_parts:
                return f"{where}.{key} has {len(value)} parts, over the limit of {limits.max_parts}"
            if key in _FREE_FORM:
                # Checked as a whole; its inside is the client's own data.
                problem = _metadata_problem(f"{where}.{key}", value, limits)
                if problem is not None:
                    return problem
                continue
            stack.append((value, f"{where}.{key}"))
    return None


def _struct_depth(value: Struct | ListValue | Value, limit: int) -> int:
    stack: list[tuple[Struct | ListValue | Value, int]] = [(value, 0)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Value):
            kind = item.WhichOneof("kind")
            if kind == "struct_value":
                stack.append((item.struct_value, depth))
            elif kind == "list_value":
                stack.append((item.list_value, depth))
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.fields.values() if isinstance(item, Struct) else item.values
        stack.extend((child, depth) for child in children)
    return deepest


def proto_shape_problem(request: Message, limits: RequestLimits) -> str | None:
    """`json_shape_problem` over a protobuf request (a gRPC call's): its `parts`, `metadata` and `data`."""
    stack: list[tuple[Message, str]] = [(request, "request")]
    while stack:
        item, where = stack.pop()
        for field, value in item.ListFields():
            path = f"{where}.{field.name}"
            if isinstance(value, Struct | ListValue | Value):
                if field.name not in _FREE_FORM:
                    continue
                if _struct_depth(value, limits.max_metadata_depth) > limits.max_metadata_depth:
                    return f"{path} is nested deeper than {limits.max_metadata_depth} levels"
                size = value.ByteSize()
                if size > limits.max_metadata_bytes:
                    return f"{path} is {size} bytes, over the limit of {limits.max_metadata_bytes}"
            elif field.message_type is None:
                continue
            elif field.is_repeated:
                if field.name == "parts" and len(value) > limits.max_parts:
                    return f"{path} has {len(value)} parts, over the limit of {limits.max_parts}"
                if field.message_type.GetOptions().map_entry:
                    continue
                stack.extend((child, f"{path}[{i}]") for i, child in enumerate(value))
            else:
                stack.append((value, path))
    return None
