from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from a2a.types import AgentCapabilities, AgentCard, AgentCardSignature
from a2a.utils import _jcs as sdk_jcs
from google.protobuf.descriptor import Descriptor
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import HealthCheck, given, settings

from a2a_x402.agentcard import CanonicalizationError, canonicalize_card
from tests.agentcard.conftest import VECTORS, load_vector, merchant_card
from tests.agentcard.strategies import card_dicts

CANONICAL_VECTORS = sorted(
    path.name
    for path in VECTORS.glob("*.json")
    if "canonical" in load_vector(path.name) and "input" in load_vector(path.name)
)
# Vectors whose members unknown to the proto are all top level, so they can be stripped for ParseDict.
PROTO_VECTORS = [
    "all_fields.json",
    "nested_empties.json",
    "non_ascii.json",
    "numbers.json",
    "security_schemes.json",
]
# The spec's AgentCard table (§5): the fields a canonical card always has, however empty.
SPEC_REQUIRED_TOP_LEVEL = {
    "name",
    "description",
    "supportedInterfaces",
    "version",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
}


def _read_as_doubles(text: str) -> Any:
    """Parse JSON reading integers beyond 2**53 as doubles (rfc8785 and the SDK's JCS refuse big ints)."""
    return json.loads(
        text, parse_int=lambda digits: int(digits) if abs(int(digits)) < 2**53 else float(digits)
    )


def test_vectors_are_all_exercised() -> None:
    assert CANONICAL_VECTORS == [
        "all_fields.json",
        "legacy_fields.json",
        "nested_empties.json",
        "non_ascii.json",
        "numbers.json",
        "security_schemes.json",
        "spec_example.json",
    ]


_SIGNATURE = AgentCardSignature.DESCRIPTOR.full_name


def _card_fields(message: Descriptor, seen: frozenset[str] = frozenset()) -> set[tuple[str, str]]:
    """(message, JSON name) of every field reachable from ``message``; ``Struct`` and signatures aside."""
    if message.full_name in seen or message.full_name.startswith("google.protobuf."):
        return set()
    fields: set[tuple[str, str]] = set()
    for field in message.fields:
        if field.message_type is not None and field.message_type.full_name == _SIGNATURE:
            continue
        if not message.GetOptions().map_entry:
            fields.add((message.full_name, field.json_name))
        if field.message_type is not None:
            fields |= _card_fields(field.message_type, seen | {message.full_name})
    return fields


def _fields_in(value: Any, message: Descriptor) -> set[tuple[str, str]]:
    """(message, JSON name) of every member of ``value`` (JSON of ``message``) that is a field, nested too."""
    if not isinstance(value, dict) or message.full_name.startswith("google.protobuf."):
        return set()
    found: set[tuple[str, str]] = set()
    for field in message.fields:
        if field.json_name not in value:
            continue
        found.add((message.full_name, field.json_name))
        member, target = value[field.json_name], field.message_type
        if target is not None and target.GetOptions().map_entry:
            target = target.fields_by_name["value"].message_type
            member = list(member.values()) if isinstance(member, dict) else []
        if target is not None:
            for item in member if isinstance(member, list) else [member]:
                found |= _fields_in(item, target)
    return found


def test_vectors_cover_every_card_field() -> None:
    card = AgentCard.DESCRIPTOR
    assert isinstance(card, Descriptor)  # the upb runtime's descriptor class passes as this one
    covered: set[tuple[str, str]] = set()
    for name in CANONICAL_VECTORS:
        covered |= _fields_in(load_vector(name)["input"], card)
    assert sorted(_card_fields(card) - covered) == []


@pytest.mark.parametrize("name", CANONICAL_VECTORS)
def test_vector_canonical_bytes(name: str) -> None:
    vector = load_vector(name)
    assert canonicalize_card(vector["input"]) == vector["canonical"].encode("utf-8")


@pytest.mark.parametrize("name", CANONICAL_VECTORS)
def test_vector_output_is_rfc8785_per_an_independent_implementation(name: str) -> None:
    # a2a-sdk ships its own JCS (a2a.utils._jcs); the committed bytes must be a fixed point of it too.
    canonical = load_vector(name)["canonical"]
    assert sdk_jcs.canonicalize(_read_as_doubles(canonical)) == canonical


@pytest.mark.parametrize("name", CANONICAL_VECTORS)
def test_canonical_form_is_a_fixed_point(name: str) -> None:
    canonical = load_vector(name)["canonical"].encode("utf-8")
    assert canonicalize_card(json.loads(canonical)) == canonical


@pytest.mark.parametrize("name", PROTO_VECTORS)
def test_protobuf_card_canonicalizes_like_its_json(name: str) -> None:
    vector = load_vector(name)
    known = {field.json_name for field in AgentCard.DESCRIPTOR.fields}
    unknown = set(vector["input"]) - known
    card = ParseDict({k: v for k, v in vector["input"].items() if k in known}, AgentCard())
    expected = {k: v for k, v in _read_as_doubles(vector["canonical"]).items() if k not in unknown}
    assert canonicalize_card(card) == rfc8785.dumps(expected)


def test_spec_example_byte_for_byte_as_a_fragment() -> None:
    vector = load_vector("spec_example.json")
    canonical = json.loads(canonicalize_card(vector["input"]))
    # The fragment omits the card's other REQUIRED fields; they come out at their defaults.
    assert {k: canonical.pop(k) for k in vector["absent_required"]} == {
        "defaultInputModes": [],
        "defaultOutputModes": [],
        "supportedInterfaces": [],
        "version": "",
    }
    assert rfc8785.dumps(canonical) == (
        b'{"capabilities":{"pushNotifications":false,"streaming":false},'
        b'"description":"","name":"Example Agent","skills":[]}'
    )
    assert rfc8785.dumps(canonical) == vector["spec_canonical"].encode()


def test_spec_example_from_a_protobuf_card() -> None:
    card = AgentCard(
        name="Example Agent",
        description="",
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
    )
    assert canonicalize_card(card) == load_vector("spec_example.json")["canonical"].encode()


def test_optional_field_unset_is_omitted_but_set_to_default_is_kept() -> None:
    unset = json.loads(canonicalize_card(AgentCard(name="a")))
    set_to_default = json.loads(canonicalize_card(AgentCard(name="a", documentation_url="", icon_url="")))
    assert "documentationUrl" not in unset and "iconUrl" not in unset
    assert set_to_default["documentationUrl"] == "" and set_to_default["iconUrl"] == ""


def test_required_fields_come_from_the_descriptor_and_match_the_spec() -> None:
    assert set(json.loads(canonicalize_card({}))) == SPEC_REQUIRED_TOP_LEVEL
    assert json.loads(canonicalize_card({"provider": {}, "skills": [{}]}))["skills"] == [
        {"description": "", "id": "", "name": "", "tags": []}
    ]


def test_signatures_are_excluded_even_when_malformed() -> None:
    base = canonicalize_card(merchant_card())
    for signatures in ([{"protected": "x", "signature": "y"}], None, "garbage", {"a": 1}):
        assert canonicalize_card({**merchant_card(), "signatures": signatures}) == base


def test_member_order_and_insignificant_whitespace_do_not_matter() -> None:
    card = merchant_card()
    reordered = json.loads(json.dumps(dict(reversed(list(card.items()))), indent=4))
    assert canonicalize_card(reordered) == canonicalize_card(card)


def test_unknown_members_are_kept_verbatim_and_snake_case_is_unknown() -> None:
    canonical = json.loads(canonicalize_card({"default_input_modes": ["a"], "url": None, "x": {"y": []}}))
    assert canonical["default_input_modes"] == ["a"]
    assert canonical["defaultInputModes"] == []
    assert canonical["url"] is None
    assert canonical["x"] == {"y": []}


def test_the_input_is_not_modified_and_tuples_are_arrays() -> None:
    card = merchant_card()
    snapshot = json.dumps(card)
    canonicalize_card(card)
    assert json.dumps(card) == snapshot
    as_tuple = {**card, "defaultInputModes": tuple(card["defaultInputModes"])}
    assert canonicalize_card(as_tuple) == canonicalize_card(card)


@pytest.mark.parametrize("case", load_vector("rejected.json")["cases"], ids=lambda case: case["description"])
def test_rejected_vectors(case: dict[str, Any]) -> None:
    with pytest.raises(CanonicalizationError) as raised:
        canonicalize_card(case["input"])
    assert raised.value.code == "card_not_canonicalizable"


@pytest.mark.parametrize(
    "card",
    [
        {"x": float("nan")},
        {"x": float("inf")},
        {"x": 2**1100},
        {"x": {1: "non-string key"}},
        {"x": {"a", "set"}},
        {"capabilities": {"extensions": [{"params": {3: "x"}}]}},
    ],
    ids=["nan", "infinity", "integer-overflowing-a-double", "int-key", "set", "int-key-in-struct"],
)
def test_python_values_without_a_json_form_are_rejected(card: dict[str, Any]) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize_card(card)


def test_not_a_mapping_is_rejected() -> None:
    with pytest.raises(CanonicalizationError, match="JSON object or an AgentCard"):
        canonicalize_card(["not", "a", "card"])  # type: ignore[arg-type]


def _nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"n": value}
    return value


def test_integers_beyond_2_pow_53_are_signed_as_their_double() -> None:
    exact, jcs_spelling = 2**60, 1152921504606847000
    canonical = canonicalize_card({"x": [exact, jcs_spelling, float(exact), 10**22]})
    assert json.loads(canonical)["x"] == [jcs_spelling, jcs_spelling, jcs_spelling, 1e22]
    assert b'"x":[1152921504606847000,1152921504606847000,1152921504606847000,1e+22]' in canonical
    for neither in (2**60 + 1, 1152921504606847001, -(2**53) - 1):
        with pytest.raises(CanonicalizationError, match="write large integers as strings"):
            canonicalize_card({"x": neither})


def test_nesting_limit_is_128_containers_like_the_sdk() -> None:
    # The card is level 1, so an unknown member holding 127 nested objects reaches exactly 128.
    assert canonicalize_card({"x": _nested(127)})
    with pytest.raises(CanonicalizationError, match="nesting exceeds 128"):
        canonicalize_card({"x": _nested(128)})
    with pytest.raises(sdk_jcs.CanonicalizationError):
        sdk_jcs.canonicalize({"x": _nested(128)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(card_dicts())
def test_json_and_protobuf_forms_canonicalize_identically(card: dict[str, Any]) -> None:
    proto = ParseDict(card, AgentCard())
    assert canonicalize_card(card) == canonicalize_card(proto) == canonicalize_card(MessageToDict(proto))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(card_dicts())
def test_canonicalization_is_idempotent(card: dict[str, Any]) -> None:
    canonical = canonicalize_card(card)
    assert canonicalize_card(json.loads(canonical)) == canonical
