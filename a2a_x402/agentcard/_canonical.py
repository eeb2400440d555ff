"""Agent Card canonicalization: A2A 1.0 §8.4.1 field presence, then RFC 8785 (JCS).

Usage::

    payload = canonicalize_card(card_json)     # bytes a signature covers; also takes an `AgentCard`

Field presence is read from the protobuf descriptors of ``a2a.types.AgentCard`` (``field_behavior``
REQUIRED annotations and ``FieldDescriptor.has_presence``), never from a hand-written list, so a new proto
field gets the right rule without a code change. For every field the proto knows, by its lowerCamelCase
JSON name:

* REQUIRED                  -> always present; filled with its default (``""``, ``[]``, ``{}``...) if absent;
* has presence (``optional`` scalars, messages, oneof members) -> kept when present, even at its default;
* anything else             -> dropped when it holds its default (``""``, ``false``, ``0``, ``[]``, ``{}``);
* JSON ``null``             -> the field is not set (ProtoJSON's reading of ``null``);
* top-level ``signatures``  -> always excluded.

Members the proto does not know (0.3 fields such as ``url``, ``preferredTransport``, ``protocolVersion``,
``additionalInterfaces``; fields of a newer proto; snake_case spellings) are kept exactly as they are,
``null`` and empties included. The server signs exactly the JSON it serves minus ``signatures``, so the
verifier must canonicalize the JSON it received, not a proto parsed from it, which would drop those members
and let them be changed without breaking the signature. A protobuf ``AgentCard`` is canonicalized through
``MessageToDict``, whose output already follows the presence rules; the result equals the canonical form of
the card's ProtoJSON.

Free-form JSON (``google.protobuf.Struct`` such as ``AgentExtension.params``) is kept as is.

Numbers: JCS reads JSON numbers as IEEE 754 doubles. An integer beyond 2**53 - 1 is accepted only when it
is exactly a double (``10**22``, ``2**60``) or the JCS spelling of one (``1152921504606847000`` for 2**60),
and is then written as that double; any other such integer (``12345678901234567890``) is refused, because
the value a reader of the text sees would not be the value signed, and many texts would share one
signature. NaN and infinities are refused.

Deviation from a2a-sdk 1.3.0: the SDK drops every empty string, list and object before JCS, including
REQUIRED ones and ``optional`` fields set to ``""``; this module follows the spec and keeps them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import Any, cast

import rfc8785
from a2a.types import AgentCard
from google.api import field_behavior_pb2
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from ._errors import CanonicalizationError
from ._parse import MAX_NESTING

__all__ = ["canonicalize_card"]

# upb's descriptor class implements protobuf's Descriptor interface.
_CARD_DESCRIPTOR = cast(Descriptor, AgentCard.DESCRIPTOR)
_MAX_SAFE_INT = 2**53 - 1
_WELL_KNOWN_PACKAGE = "google.protobuf"

_NUMERIC_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_DOUBLE,
        FieldDescriptor.TYPE_FLOAT,
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED32,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED32,
        FieldDescriptor.TYPE_SFIXED64,
    }
)
# ProtoJSON writes 64-bit integers as strings, so their default is "0", not 0.
_STRING_ENCODED_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


def canonicalize_card(card: AgentCard | Mapping[str, Any]) -> bytes:
    """Return the bytes an Agent Card signature covers (A2A §8.4.1).

    Args:
        card: A protobuf ``AgentCard``, or the card's JSON object as served or received (see the module
            docstring for how members the proto does not know are treated).

    Returns:
        The UTF-8 RFC 8785 serialization of the card without ``signatures``, with field presence applied.

    Raises:
        CanonicalizationError: a known field has the wrong JSON type, a number or string has no canonical
            form, or nesting exceeds 128 levels.
    """
    card_json = card_to_json(card)
    unsigned = {key: value for key, value in card_json.items() if key != "signatures"}
    canonical = _message(unsigned, _CARD_DESCRIPTOR, "", 1)
    try:
        return rfc8785.dumps(canonical)
    except (rfc8785.CanonicalizationError, UnicodeError) as exc:
        # rfc8785 reports a lone surrogate in a value as its own error but in a member name as UnicodeError.
        raise CanonicalizationError(f"no canonical form: text is not valid Unicode ({exc})") from exc


def card_to_json(card: AgentCard | Mapping[str, Any]) -> Mapping[str, Any]:
    """The card's JSON object: ProtoJSON of an ``AgentCard``, or the mapping itself."""
    if isinstance(card, AgentCard):
        proto_json: dict[str, Any] = json_format.MessageToDict(card)
        return proto_json
    if not isinstance(card, Mapping):
        raise CanonicalizationError(
            f"an agent card must be a JSON object or an AgentCard, got {type(card).__name__}"
        )
    return card


def _message(obj: Any, descriptor: Descriptor, path: str, depth: int) -> dict[str, Any]:
    if not isinstance(obj, Mapping):
        raise CanonicalizationError(f"{path or 'card'}: expected a JSON object, got {_type_name(obj)}")
    _check_depth(path, depth)
    fields = _fields_by_json_name(descriptor)
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise CanonicalizationError(f"{path or 'card'}: member names must be strings, got {key!r}")
        member_path = f"{path}.{key}" if path else key
        field = fields.get(key)
        if field is None:
            out[key] = _json(value, member_path, depth + 1)
        elif value is not None:
            canonical = _field(field, value, member_path, depth + 1)
            if _is_required(field) or field.has_presence or not _is_default(field, canonical):
                out[key] = canonical
    for field in descriptor.fields:
        if field.json_name not in out and _is_required(field):
            out[field.json_name] = _default(
                field, f"{path}.{field.json_name}" if path else field.json_name, depth + 1
            )
    return out


def _field(field: FieldDescriptor, value: Any, path: str, depth: int) -> Any:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        if not isinstance(value, Mapping):
            raise CanonicalizationError(f"{path}: expected a JSON object (map), got {_type_name(value)}")
        _check_depth(path, depth)
        value_field = entry.fields_by_name["value"]
        return {
            _map_key(key, path): _single(value_field, item, f"{path}.{key}", depth + 1)
            for key, item in value.items()
        }
    if field.is_repeated:
        if not isinstance(value, list | tuple):
            raise CanonicalizationError(f"{path}: expected a JSON array, got {_type_name(value)}")
        _check_depth(path, depth)
        return [_single(field, item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]
    return _single(field, value, path, depth)


def _single(field: FieldDescriptor, value: Any, path: str, depth: int) -> Any:
    message = field.message_type
    if message is not None:
        if message.file.package == _WELL_KNOWN_PACKAGE:
            return _json(value, path, depth)
        return _message(value, message, path, depth)
    if not _scalar_type_matches(field, value):
        raise CanonicalizationError(f"{path}: {_type_name(value)} is not a valid {_scalar_kind(field)} value")
    return _json(value, path, depth)


def _json(value: Any, path: str, depth: int) -> Any:
    """Check that ``value`` is JSON and put its numbers in the form JCS serializes."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return _integer(value, path)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalizationError(f"{path}: {value} is not a JSON number")
        return value
    if isinstance(value, list | tuple):
        _check_depth(path, depth)
        return [_json(item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]
    if isinstance(value, Mapping):
        _check_depth(path, depth)
        return {_map_key(key, path): _json(item, f"{path}.{key}", depth + 1) for key, item in value.items()}
    raise CanonicalizationError(f"{path}: {_type_name(value)} is not a JSON value")


def _integer(value: int, path: str) -> int | float:
    if -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
        return value
    try:
        as_double = float(value)
    except OverflowError as exc:
        raise CanonicalizationError(f"{path}: {value} is out of the range of a JSON number") from exc
    # Two spellings name a double: its exact value (2**60 = 1152921504606846976) and its JCS form
    # (1152921504606847000), which must be accepted so that canonical output canonicalizes to itself.
    if int(as_double) != value and rfc8785.dumps(as_double) != str(value).encode("ascii"):
        raise CanonicalizationError(
            f"{path}: {value} is neither an IEEE 754 double nor the shortest form of one; "
            "write large integers as strings"
        )
    return as_double


def _default(field: FieldDescriptor, path: str, depth: int) -> Any:
    """The ProtoJSON form of ``field`` at its default value."""
    if field.is_repeated:
        return {} if _is_map(field) else []
    message, enum = field.message_type, field.enum_type
    if message is not None:
        if message.file.package == _WELL_KNOWN_PACKAGE:
            return json_format.MessageToDict(message_factory.GetMessageClass(message)())
        return _message({}, message, path, depth)
    if enum is not None:
        return enum.values_by_number[0].name
    if field.type in _STRING_ENCODED_TYPES:
        return "0"
    if field.type in _NUMERIC_TYPES:
        return 0
    if field.type == FieldDescriptor.TYPE_BOOL:
        return False
    return ""


def _is_default(field: FieldDescriptor, value: Any) -> bool:
    """Whether ``value`` (already checked against the field's type) is the field's default."""
    if field.is_repeated:
        return len(value) == 0
    if field.enum_type is not None:
        return value in (0, field.enum_type.values_by_number[0].name)
    if field.type in _NUMERIC_TYPES:
        return float(value) == 0
    return bool(value == _default(field, "", 0))


def _scalar_type_matches(field: FieldDescriptor, value: Any) -> bool:
    if field.type == FieldDescriptor.TYPE_BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if field.type == FieldDescriptor.TYPE_ENUM:
        return isinstance(value, str | int)
    if field.type in _NUMERIC_TYPES:
        # ProtoJSON also accepts numbers written as strings.
        return isinstance(value, int | float) or (isinstance(value, str) and _is_number_text(value))
    return isinstance(value, str)


def _is_number_text(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _scalar_kind(field: FieldDescriptor) -> str:
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "boolean"
    if field.type == FieldDescriptor.TYPE_ENUM:
        return "enum"
    if field.type in _NUMERIC_TYPES:
        return "number"
    return "string"


def _map_key(key: Any, path: str) -> str:
    if not isinstance(key, str):
        raise CanonicalizationError(f"{path}: member names must be strings, got {key!r}")
    return key


def _check_depth(path: str, depth: int) -> None:
    # Containers on the path, the card itself at 1; the bound is a2a-sdk's too, so a card one side can
    # canonicalize is not refused by the other. Nesting is attacker-chosen through extension params.
    if depth > MAX_NESTING:
        raise CanonicalizationError(f"{path}: nesting exceeds {MAX_NESTING} levels")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


@cache
def _fields_by_json_name(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    return {field.json_name: field for field in descriptor.fields}


@cache
def _is_required(field: FieldDescriptor) -> bool:
    behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.REQUIRED in behaviors


@cache
def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and bool(field.message_type.GetOptions().map_entry)
