from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping

import pytest
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct

from a2a_x402.extension import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_STRING_CHARS,
    ExtensionMetadataError,
    MetadataErrorCode,
    expect_int,
    normalize_struct_value,
)


def test_integral_floats_become_ints_recursively() -> None:
    value = {"x402Version": 2.0, "accepts": [{"maxTimeoutSeconds": 600.0, "extra": {"n": [1.0, -3.0, 0.0]}}]}
    result = normalize_struct_value(value, "m")
    assert result == {"x402Version": 2, "accepts": [{"maxTimeoutSeconds": 600, "extra": {"n": [1, -3, 0]}}]}
    assert isinstance(result, dict) and type(result["x402Version"]) is int
    assert json.dumps(result) == (
        '{"x402Version": 2, "accepts": [{"maxTimeoutSeconds": 600, "extra": {"n": [1, -3, 0]}}]}'
    )


def test_the_input_is_not_modified() -> None:
    value = {"a": [1.0]}
    normalize_struct_value(value, "m")
    assert value == {"a": [1.0]} and type(value["a"][0]) is float


def test_fractions_strings_and_other_scalars_are_kept() -> None:
    value = {
        "price": 0.5,
        "amount": "10000",
        "ratio": "2.0",
        "ok": True,
        "no": False,
        "nothing": None,
        "n": 7,
    }
    result = normalize_struct_value(value, "m")
    assert result == value
    assert isinstance(result, dict)
    assert result["ok"] is True and result["amount"] == "10000" and result["ratio"] == "2.0"


def test_protobuf_struct_is_read_directly() -> None:
    struct = ParseDict({"v": 2, "list": [1, {"x": 3}], "s": "2"}, Struct())
    assert normalize_struct_value(struct, "m") == {"v": 2, "list": [1, {"x": 3}], "s": "2"}
    assert MessageToDict(struct)["v"] == 2.0  # the reason this module exists


def test_largest_exact_integer_survives() -> None:
    assert normalize_struct_value(float(2**53 - 1), "m") == 2**53 - 1
    assert normalize_struct_value(-float(2**53 - 1), "m") == -(2**53 - 1)


@pytest.mark.parametrize("value", [float(2**53), float(2**60), -float(2**53), 1e300])
def test_integral_floats_that_may_have_lost_precision_are_refused(value: float) -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value({"a": [value]}, "m")
    assert info.value.code is MetadataErrorCode.INVALID_NUMBER
    assert info.value.path == "m.a[0]"


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused(value: float) -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value({"a": value}, "m")
    assert info.value.code is MetadataErrorCode.INVALID_NUMBER


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object(), {1: "int key"}, 1j])
def test_non_json_values_are_refused(value: object) -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value({"a": value}, "m")
    assert info.value.code is MetadataErrorCode.INVALID_TYPE
    assert info.value.path == "m.a"


def test_tuples_and_other_sequences_become_lists() -> None:
    assert normalize_struct_value({"a": (1.0, "x")}, "m") == {"a": [1, "x"]}


def test_depth_limit() -> None:
    ok: object = "leaf"
    for _ in range(MAX_DEPTH):
        ok = [ok]
    normalize_struct_value(ok, "m")
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value([ok], "m")
    assert info.value.code is MetadataErrorCode.TOO_LARGE


def test_depth_limit_holds_far_beyond_the_recursion_limit() -> None:
    deep: object = {}
    for _ in range(100_000):
        deep = {"k": deep}
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value(deep, "m")
    assert info.value.code is MetadataErrorCode.TOO_LARGE


def test_node_limit() -> None:
    normalize_struct_value([0] * (MAX_NODES - 1), "m")
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value([0] * MAX_NODES, "m")
    assert info.value.code is MetadataErrorCode.TOO_LARGE


def test_string_limit_counts_keys_and_values_together() -> None:
    half = MAX_STRING_CHARS // 2
    normalize_struct_value({"k" * half: "v" * half}, "m")
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value({"k" * half: "v" * (half + 1)}, "m")
    assert info.value.code is MetadataErrorCode.TOO_LARGE


class _Endless(Mapping[str, object]):
    """A mapping that claims to be huge; the walk must stop at the node limit, not iterate it all."""

    def __getitem__(self, key: str) -> object:
        return 0

    def __iter__(self) -> Iterator[str]:
        index = 0
        while True:
            yield f"k{index}"
            index += 1

    def __len__(self) -> int:
        return 10**12


def test_walk_stops_at_the_node_limit() -> None:
    with pytest.raises(ExtensionMetadataError) as info:
        normalize_struct_value(_Endless(), "m")
    assert info.value.code is MetadataErrorCode.TOO_LARGE


def test_expect_int() -> None:
    assert expect_int(2, "v") == 2
    with pytest.raises(ExtensionMetadataError) as fraction:
        expect_int(2.5, "v")
    assert fraction.value.code is MetadataErrorCode.INVALID_NUMBER
    assert str(fraction.value) == "v: expected an integer, got the fraction 2.5"
    for wrong in (True, "2", None, [2], {"v": 2}):
        with pytest.raises(ExtensionMetadataError) as info:
            expect_int(wrong, "v")  # type: ignore[arg-type]
        assert info.value.code is MetadataErrorCode.INVALID_TYPE
