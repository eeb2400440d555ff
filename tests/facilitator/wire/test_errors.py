"""WireError: stable reason, readable path, and no echo of hostile input."""

from __future__ import annotations

import pytest

from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequirements,
    Reason,
    WireError,
    parse_payment_payload,
    parse_verify_request,
)

from . import documents as docs

MARKER = "HOSTILE-INPUT"


def _error(parse: object, data: object) -> WireError:
    assert callable(parse)
    with pytest.raises(WireError) as caught:
        parse(data)
    return caught.value


def test_wire_error_is_a_value_error_with_reason_code_path_and_message() -> None:
    error = WireError(Reason.INVALID_PAYLOAD, "expected a string", "payload.signature")
    assert isinstance(error, ValueError)
    assert error.reason is Reason.INVALID_PAYLOAD
    assert error.code == "invalid_payload"
    assert error.path == "payload.signature"
    assert error.message == str(error) == "payload.signature: expected a string"
    assert (
        repr(error) == "WireError(reason='invalid_payload', message='payload.signature: expected a string')"
    )
    assert WireError(Reason.INVALID_PAYLOAD, "expected a JSON object").message == "expected a JSON object"


@pytest.mark.parametrize(
    "field",
    ["signature", "authorization.nonce", "authorization.value", "authorization.from"],
)
def test_huge_bad_values_are_not_echoed(field: str) -> None:
    doc = docs.payment_payload_v2()
    target = doc["payload"]
    *parents, last = field.split(".")
    for parent in parents:
        target = target[parent]
    target[last] = MARKER * 200_000
    error = _error(parse_payment_payload, doc)
    assert MARKER not in error.message and len(error.message) < 200
    # The pydantic error, which embeds the input, is not chained either.
    assert error.__cause__ is None and error.__suppress_context__


def test_unknown_keys_are_shortened_and_escaped() -> None:
    hostile_key = "evil\n" + MARKER * 1000
    error = _error(parse_payment_payload, docs.payment_payload_v2() | {hostile_key: 1})
    assert "\n" not in error.message
    assert len(error.message) < 150
    assert error.message.endswith(": unknown field")
    assert error.path.startswith('"evil\\n')


def test_pydantic_messages_do_not_echo_values_either() -> None:
    error = _error(PaymentRequirements.from_wire, docs.requirements_v2() | {"extra": MARKER * 1000})
    assert MARKER not in error.message
    assert error.message == "extra: expected an object, got a string"


def test_several_problems_are_counted() -> None:
    doc = docs.payment_payload_v2()
    doc["payload"]["authorization"]["value"] = 1
    doc["payload"]["authorization"]["nonce"] = 2
    doc["accepted"]["amount"] = 3
    error = _error(PaymentPayload.from_wire, doc)
    assert (
        error.message
        == "payload.authorization.value: expected a decimal string, got an integer (and 2 more problems)"
    )


def test_a_version_problem_is_reported_before_earlier_problems() -> None:
    body = docs.verify_request_v2()
    body["paymentPayload"]["x402Version"] = 1
    body["paymentPayload"]["payload"]["signature"] = "nope"
    error = _error(parse_verify_request, body)
    assert error.reason is Reason.INVALID_X402_VERSION
    assert error.path == "paymentPayload.x402Version"


def test_problems_inside_free_form_objects_name_the_object() -> None:
    body = docs.verify_request_v1()
    body["paymentRequirements"]["extra"] = {"name": "USDC", "version": float("inf")}
    error = _error(parse_verify_request, body)
    assert error.message == "paymentRequirements.extra: NaN and infinite numbers are not JSON"


def test_a_missing_version_is_a_version_problem_at_any_depth() -> None:
    doc = docs.payment_payload_v2()
    del doc["x402Version"]
    error = _error(PaymentPayload.from_wire, doc)
    assert error.reason is Reason.INVALID_X402_VERSION
    assert error.message == "x402Version: required field is missing"
    body = docs.verify_request_v2()
    del body["paymentPayload"]["x402Version"]
    body["paymentPayload"]["accepted"]["amount"] = "-1"
    error = _error(parse_verify_request, body)
    assert error.reason is Reason.INVALID_X402_VERSION
    assert error.message == "paymentPayload.x402Version: required field is missing (and 1 more problem)"
