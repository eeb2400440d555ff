"""Bring extension data that went through a ``google.protobuf.Struct`` back to plain JSON.

A2A 1.0 carries ``metadata`` as a protobuf ``Struct``, which has one number type, a double:
``{"x402Version": 2}`` comes back from ``MessageToDict`` as ``{"x402Version": 2.0}``. The x402
types need integers there, so integral floats are turned back into ints. Floats that are not
integral are left as they are (x402 ``extra`` may legitimately hold a fraction); a field that
needs an integer then rejects them (``expect_int`` here, or the x402 model). Integral floats
of 2**53 or more are refused: a double cannot hold them exactly, so the integer the sender meant is
already lost. Strings are never touched, which is why money travels as decimal strings.

The same single walk also enforces the shape of untrusted input: only JSON types (objects with
string keys, arrays, strings, numbers, booleans, null; any ``Mapping`` or non-string
``Sequence`` is accepted so that a protobuf ``Struct`` can be read directly) and bounded size,
so that garbage raises ``ExtensionMetadataError`` instead of crashing or exhausting memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from ._errors import ExtensionMetadataError, MetadataErrorCode, child_path

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_STRING_CHARS",
    "JsonValue",
    "expect_int",
    "normalize_struct_value",
]

JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"

MAX_DEPTH = 32
"""Deepest nesting accepted below the extension's top-level value (x402 values need about 6)."""
MAX_NODES = 10_000
"""Most JSON values (objects, arrays and scalars together) accepted in one extension value."""
MAX_STRING_CHARS = 262_144
"""Most characters accepted in all strings and keys of one extension value together."""

# Beyond this magnitude a double no longer tells neighbouring integers apart (2**53 + 1 reads as 2**53).
_MAX_EXACT_FLOAT_INT = 2**53 - 1


class _Budget:
    """What is left of the size limits during one walk."""

    __slots__ = ("chars", "nodes")

    def __init__(self) -> None:
        self.nodes = MAX_NODES
        self.chars = MAX_STRING_CHARS

    def spend_node(self, path: str) -> None:
        self.nodes -= 1
        if self.nodes < 0:
            raise ExtensionMetadataError(
                MetadataErrorCode.TOO_LARGE, f"more than {MAX_NODES} JSON values", path
            )

    def spend_chars(self, text: str, path: str) -> None:
        self.chars -= len(text)
        if self.chars < 0:
            raise ExtensionMetadataError(
                MetadataErrorCode.TOO_LARGE, f"more than {MAX_STRING_CHARS} characters of strings", path
            )


def normalize_struct_value(value: object, path: str) -> JsonValue:
    """Return a plain-JSON copy of ``value`` with integral floats turned into ints.

    Args:
        value: untrusted data, typically one metadata entry (a dict or a protobuf ``Struct``).
        path: where ``value`` sits, used in error messages.

    Returns:
        A new tree of ``dict``/``list``/scalars; the input is not modified.

    Raises:
        ExtensionMetadataError: ``invalid_type`` for non-JSON values or non-string keys,
            ``invalid_number`` for NaN, infinities and integral floats of 2**53 or more,
            ``too_large`` when a size limit is exceeded.
    """
    return _walk(value, path, 0, _Budget())


def normalize_members(members: Mapping[str, object], path_of: Callable[[str], str]) -> dict[str, JsonValue]:
    """Normalise the members of one extension value under one shared size budget.

    The v0.2 dialect spreads one extension value over several flat metadata keys; sharing the
    budget keeps the limits the same as for the single v0.3 object.
    """
    budget = _Budget()
    return {name: _walk(value, path_of(name), 1, budget) for name, value in members.items()}


def expect_int(value: JsonValue, path: str) -> int:
    """Return ``value`` as an int where the wire requires an integer.

    ``value`` must already have been through ``normalize_struct_value``, so an integral float has
    become an int and any float left here has a fractional part.

    Raises:
        ExtensionMetadataError: ``invalid_number`` for a fractional number, ``invalid_type`` for
            anything that is not a number (booleans included).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_TYPE, f"expected an integer, got {json_type_name(value)}", path
        )
    if isinstance(value, float):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_NUMBER, f"expected an integer, got the fraction {value!r}", path
        )
    return value


def _walk(value: object, path: str, depth: int, budget: _Budget) -> JsonValue:
    budget.spend_node(path)
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return _normalize_float(value, path)
    if isinstance(value, str):
        budget.spend_chars(value, path)
        return value
    if (
        depth >= MAX_DEPTH
        and isinstance(value, Mapping | Sequence)
        and not isinstance(value, bytes | bytearray)
    ):
        raise ExtensionMetadataError(
            MetadataErrorCode.TOO_LARGE, f"nested deeper than {MAX_DEPTH} levels", path
        )
    if isinstance(value, Mapping):
        result: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ExtensionMetadataError(
                    MetadataErrorCode.INVALID_TYPE,
                    f"object keys must be strings, got {type(key).__name__}",
                    path,
                )
            budget.spend_chars(key, path)
            item_path = child_path(path, key)
            result[key] = _walk(item, item_path, depth + 1, budget)
        return result
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_walk(item, child_path(path, index), depth + 1, budget) for index, item in enumerate(value)]
    raise ExtensionMetadataError(
        MetadataErrorCode.INVALID_TYPE, f"{type(value).__name__} is not a JSON value", path
    )


def _normalize_float(value: float, path: str) -> int | float:
    if not math.isfinite(value):
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_NUMBER, f"{value!r} is not a JSON number", path
        )
    if not value.is_integer():
        return value
    if abs(value) > _MAX_EXACT_FLOAT_INT:
        raise ExtensionMetadataError(
            MetadataErrorCode.INVALID_NUMBER,
            f"{value!r} is 2**53 or more and may have lost precision as a float; send it as a string",
            path,
        )
    return int(value)


def json_type_name(value: object) -> str:
    """Name the JSON type of ``value`` for error messages ("an object", "null", ...), never its content."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return "an array"
    return f"a Python {type(value).__name__}"
