"""Extension metadata as the merchant really receives it: through a protobuf `Struct`, in both dialects.

`tests/extension/test_metadata.py` shows `decode` raises only `ExtensionMetadataError` on metadata given as
JSON. On the wire, A2A 1.0 metadata is a `google.protobuf.Struct`: every number becomes a double and the
payment layer reads `MessageToDict(message.metadata)`. These properties run that path, the number
normalisation it relies on (with values no JSON parser produces), and the dialect negotiation that runs on
raw request headers.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_x402.extension import (
    EXTENSION_URI,
    EXTENSION_URI_V01,
    EXTENSION_URI_V02,
    MAX_DEPTH,
    Dialect,
    ExtensionMetadataError,
    MetadataErrorCode,
    decode,
    encode,
    negotiate_dialect,
    normalize_struct_value,
)
from tests.extension import documents as doc

from .strategies import json_values, mutated, printable_text

_FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_MEMBERS = {
    "payment-required": lambda: {"status": "payment-required", "required": doc.required_v2()},
    "payment-required v1": lambda: {"status": "payment-required", "required": doc.required_v1()},
    "payment-submitted": lambda: {"status": "payment-submitted", "payload": doc.payload_v2()},
    "payment-submitted v1": lambda: {"status": "payment-submitted", "payload": doc.payload_v1()},
    "payment-verified": lambda: {"status": "payment-verified"},
    "payment-completed": lambda: {"status": "payment-completed", "receipts": [doc.receipt_v2()]},
    "payment-pending": lambda: {"status": "payment-completed", "receipts": [doc.pending_v2()]},
    "payment-failed": lambda: {
        "status": "payment-failed",
        "error": "SETTLEMENT_FAILED",
        "receipts": [doc.failed_v2()],
    },
    "payment-rejected": lambda: {"status": "payment-rejected"},
}
_plausible = st.one_of(
    json_values,
    st.sampled_from(
        [2, 1, 2.0, 2**53, 2.0**53, 0.5, "2", "eip155:84532", "base-sepolia", doc.PAYER, "", [], {}]
    ),
)


def _in_dialect(members: Any, dialect: Dialect) -> Any:
    if dialect is Dialect.V03 or not isinstance(members, dict):
        return {EXTENSION_URI: members}
    return {f"x402.payment.{name}": value for name, value in members.items()}


@st.composite
def _metadata(draw: st.DrawFn) -> tuple[dict[str, Any], Dialect]:
    members = draw(mutated(list(_MEMBERS.values()), _plausible))
    written_in = draw(st.sampled_from(list(Dialect)))
    read_in = written_in if draw(st.integers(0, 4)) else draw(st.sampled_from(list(Dialect)))
    return _in_dialect(members, written_in), read_in


def _through_struct(metadata: dict[str, Any]) -> Struct | None:
    """The metadata as a `Struct`, as the SDK holds it after parsing a request, or None when the SDK could
    not have built it (a `Struct` cannot hold lone surrogates or integers beyond a double's range)."""
    try:
        return json_format.ParseDict(metadata, Struct())
    except (json_format.ParseError, ValueError, OverflowError):
        return None


@_FUZZ
@given(_metadata())
def test_struct_metadata_decodes_like_json_or_is_refused_as_imprecise(
    case: tuple[dict[str, Any], Dialect],
) -> None:
    metadata, dialect = case
    as_received = _through_struct(metadata)
    if as_received is None:
        return
    try:
        expected = decode(metadata, dialect)
    except ExtensionMetadataError:
        expected = None
        direct_failed = True
    else:
        direct_failed = False
    try:
        # A Struct is read as the Mapping it is registered as (decode's documented input; protobuf's stubs
        # do not declare it one).
        decoded = decode(as_received, dialect)  # type: ignore[arg-type]
    except ExtensionMetadataError as exc:
        assert exc.code in set(MetadataErrorCode)
        # Through a Struct, an integer of 2**53 or more can no longer be read exactly; everything else
        # that fails must have failed as plain JSON too.
        assert direct_failed or exc.code is MetadataErrorCode.INVALID_NUMBER
        return
    assert not direct_failed, "the Struct form was accepted though the JSON form was refused"
    assert decoded == expected
    if decoded is not None:
        assert decode(encode(decoded, dialect), dialect) == decoded


class _Opaque:
    """Not a JSON value of any kind."""


_python_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    printable_text,
    st.binary(max_size=4),
    st.just(_Opaque()),
    st.just(math.inf),
    st.just(2.0**60),
    st.sets(st.integers(), max_size=2),
)
_python_values = st.recursive(
    _python_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(printable_text, children, max_size=3),
        st.dictionaries(st.integers() | st.none(), children, min_size=1, max_size=2),
        st.dictionaries(printable_text, children, max_size=3).map(OrderedDict),
    ),
    max_leaves=12,
)


@_FUZZ
@given(_python_values)
def test_normalisation_of_any_python_value_raises_only_extension_metadata_error(value: object) -> None:
    try:
        normalized = normalize_struct_value(value, "metadata")
    except ExtensionMetadataError as exc:
        assert exc.code in {
            MetadataErrorCode.INVALID_TYPE,
            MetadataErrorCode.INVALID_NUMBER,
            MetadataErrorCode.TOO_LARGE,
        }
        return
    # What comes out is plain JSON that normalises to itself.
    assert normalize_struct_value(normalized, "metadata") == normalized


@settings(max_examples=50, deadline=None)
@given(st.integers(MAX_DEPTH - 2, MAX_DEPTH * 40), st.sampled_from(["list", "dict"]))
def test_deep_nesting_is_refused_without_recursing_past_the_limit(depth: int, shape: str) -> None:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if shape == "list" else {"k": value}
    # The payload object sits at depth 1, so the innermost container is at depth `depth + 1`.
    payload = {"x402Version": 2, "payload": value}
    metadata = {EXTENSION_URI: {"status": "payment-submitted", "payload": payload}}
    try:
        decode(metadata, Dialect.V03)
    except ExtensionMetadataError as exc:
        too_deep = depth + 1 >= MAX_DEPTH
        assert exc.code is (MetadataErrorCode.TOO_LARGE if too_deep else MetadataErrorCode.INVALID_X402_VALUE)
    else:
        raise AssertionError("a payload that is not a payment payload was accepted")


_uris = st.sampled_from([EXTENSION_URI, EXTENSION_URI_V02, EXTENSION_URI_V01, " " + EXTENSION_URI + "\t"])


@_FUZZ
@given(
    st.lists(_uris | printable_text, max_size=4),
    st.none() | st.sampled_from(["1.0", "1.1", "0.3", "0.3.0", "", "2.0", "1", "01.0"]) | printable_text,
)
def test_dialect_negotiation_on_any_header_values(extensions: list[str], version: str | None) -> None:
    dialect = negotiate_dialect(extensions, version)
    assert dialect is None or isinstance(dialect, Dialect)
    listed = {uri.strip() for uri in extensions}
    if dialect is Dialect.V03:
        assert EXTENSION_URI in listed
    if dialect is Dialect.V02:
        assert listed & {EXTENSION_URI_V02, EXTENSION_URI_V01}
