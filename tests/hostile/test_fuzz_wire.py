"""x402 documents, past the parser: whatever `facilitator.wire` accepts converts, re-serializes and re-parses.

`tests/facilitator/wire/test_properties.py` shows the `parse_*` entry points raise only `WireError`. These
properties follow what gets through into the code that uses it: `request_to_v2` (what `/verify` and
`/settle` run next), the v2 → v1 conversions (`requirements_v2_to_v1`, `settle_response_to_v1`), and the
`to_json_dict` → `from_wire` round trip that every hop between merchant, payer and facilitator relies on.
The bodies come in as bytes, read by `orjson` exactly as the facilitator's HTTP app reads them.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_x402.facilitator.wire import (
    PaymentRequired,
    Reason,
    SettleResponse,
    WireError,
    WireModel,
    parse_payment_payload,
    parse_payment_required,
    parse_settle_request,
    parse_verify_request,
    request_to_v2,
    requirements_v1_to_v2,
    requirements_v2_to_v1,
    resource_info_from_v1,
    settle_response_to_v1,
)
from tests.facilitator.wire import documents as docs

from .strategies import json_values, mutated

_FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values that pass the field validators when they land in the right place, so a mutation often yields a
# document that parses with one surprising field, not one that fails at the first check.
_plausible = st.one_of(
    json_values,
    st.sampled_from(
        [
            docs.MERCHANT,
            docs.PAYER,
            docs.MERCHANT.lower(),
            docs.NONCE,
            docs.EOA_SIGNATURE,
            "0x" + "ab" * 4096,
            "0",
            str(2**256 - 1),
            str(2**256),
            "eip155:1",
            "eip155:84532",
            "eip155:" + "9" * 40,
            "base",
            "base-sepolia",
            "exact",
            "upto",
            1,
            2,
            2**63,
            {"name": "USDC", "version": "2"},
            {},
            [],
        ]
    ),
)
_requests = mutated([docs.verify_request_v2, docs.verify_request_v1], _plausible)
_requireds = mutated([docs.payment_required_v2, docs.payment_required_v1], _plausible)
_payloads = mutated([docs.payment_payload_v2, docs.payment_payload_v1], _plausible)


def _body_bytes(document: Any) -> bytes | None:
    """`document` as an HTTP body, or None when it has no JSON text (floats NaN, integers beyond 64 bits)."""
    try:
        return orjson.dumps(document)
    except (orjson.JSONEncodeError, TypeError):
        return None


def _assert_round_trips(model: WireModel) -> None:
    # json, not orjson: the free-form members (`extra`, `extensions`) may hold integers beyond 64 bits.
    wire = model.to_json_dict()
    assert type(model).from_wire(json.loads(json.dumps(wire))) == model


@_FUZZ
@given(_requests)
def test_an_accepted_request_body_converts_to_v2_and_round_trips(document: Any) -> None:
    body = _body_bytes(document)
    if body is None:
        return
    for parse in (parse_verify_request, parse_settle_request):
        try:
            parsed = parse(orjson.loads(body))
        except WireError as exc:
            assert exc.reason in {
                Reason.INVALID_PAYLOAD,
                Reason.INVALID_PAYMENT_REQUIREMENTS,
                Reason.INVALID_X402_VERSION,
            }
            continue
        # Everything the facilitator does with a parsed body must work on any parsed body.
        payload, requirements = request_to_v2(parsed)
        _assert_round_trips(payload)
        _assert_round_trips(requirements)


@_FUZZ
@given(_requireds)
def test_accepted_terms_convert_to_v1_and_back_or_name_the_network(document: Any) -> None:
    try:
        parsed = parse_payment_required(document)
    except WireError:
        return
    if isinstance(parsed, PaymentRequired):
        _assert_round_trips(parsed)
        for requirements in parsed.accepts:
            try:
                legacy = requirements_v2_to_v1(requirements, parsed.resource)
            except WireError as exc:
                # A chain without a legacy v1 name cannot be offered to a v1 payer.
                assert exc.reason is Reason.INVALID_NETWORK
                continue
            assert requirements_v1_to_v2(legacy) == requirements
    else:
        for legacy in parsed.accepts:
            requirements = requirements_v1_to_v2(legacy)
            back = requirements_v2_to_v1(requirements, resource_info_from_v1(legacy))
            assert (back.network, back.max_amount_required) == (legacy.network, legacy.max_amount_required)


@_FUZZ
@given(_payloads)
def test_an_accepted_payload_round_trips(document: Any) -> None:
    try:
        parsed = parse_payment_payload(document)
    except WireError:
        return
    assert type(parsed).from_wire(parsed.to_json_dict()) == parsed


@_FUZZ
@given(mutated([docs.settle_success_v2], _plausible))
def test_an_accepted_settle_answer_converts_to_v1_or_names_the_network(document: Any) -> None:
    try:
        parsed = SettleResponse.from_wire(document)
    except WireError:
        return
    try:
        legacy = settle_response_to_v1(parsed)
    except WireError as exc:
        assert exc.reason is Reason.INVALID_NETWORK
        return
    assert legacy.success is parsed.success
    assert legacy.transaction == parsed.transaction


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | json_values.map(lambda value: _body_bytes(value) or b""))
def test_request_bytes_are_json_or_refused_before_the_parser(body: bytes) -> None:
    """The facilitator's body reading: orjson refuses what is not JSON, the parser refuses the rest."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return
    with pytest.raises(WireError):
        # Arbitrary bytes never make a valid request: a well-formed one needs a signature of 65 bytes.
        parse_verify_request(document)
