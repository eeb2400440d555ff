"""`/verify` and `/settle` bodies: version dispatch, version consistency and reason routing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a_x402.facilitator.wire import (
    Reason,
    SettleRequest,
    SettleRequestV1,
    VerifyRequest,
    VerifyRequestV1,
    WireError,
    parse_settle_request,
    parse_verify_request,
)

from . import documents as docs

PARSERS: list[Callable[[object], object]] = [parse_verify_request, parse_settle_request]


def test_bodies_dispatch_on_their_version() -> None:
    assert type(parse_verify_request(docs.verify_request_v2())) is VerifyRequest
    assert type(parse_verify_request(docs.verify_request_v1())) is VerifyRequestV1
    assert type(parse_settle_request(docs.verify_request_v2())) is SettleRequest
    assert type(parse_settle_request(docs.verify_request_v1())) is SettleRequestV1


@pytest.mark.parametrize("make", [docs.verify_request_v2, docs.verify_request_v1])
def test_bodies_round_trip(make: Callable[[], dict[str, Any]]) -> None:
    doc = make()
    assert parse_verify_request(doc).to_json_dict() == doc


@pytest.mark.parametrize("parse", PARSERS)
def test_v2_body_with_v1_payload_is_a_version_error(parse: Callable[[object], object]) -> None:
    body = docs.verify_request_v2() | {"paymentPayload": docs.payment_payload_v1()}
    with pytest.raises(WireError) as caught:
        parse(body)
    assert caught.value.reason is Reason.INVALID_X402_VERSION
    assert caught.value.message.startswith("paymentPayload.x402Version: expected 2, got 1 (and ")


@pytest.mark.parametrize("parse", PARSERS)
def test_v1_body_with_v2_parts_is_a_version_error(parse: Callable[[object], object]) -> None:
    body = docs.verify_request_v1() | {"paymentPayload": docs.payment_payload_v2()}
    with pytest.raises(WireError) as caught:
        parse(body)
    assert caught.value.reason is Reason.INVALID_X402_VERSION
    assert caught.value.path == "paymentPayload.x402Version"


def test_v2_body_with_v1_requirements_is_a_requirements_error() -> None:
    body = docs.verify_request_v2() | {"paymentRequirements": docs.requirements_v1()}
    with pytest.raises(WireError) as caught:
        parse_verify_request(body)
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS
    assert caught.value.message.startswith("paymentRequirements.")


def test_payload_errors_report_invalid_payload_with_the_full_path() -> None:
    body = docs.verify_request_v2()
    body["paymentPayload"]["payload"]["authorization"]["nonce"] = "0x1234"
    with pytest.raises(WireError) as caught:
        parse_verify_request(body)
    assert caught.value.reason is Reason.INVALID_PAYLOAD
    assert caught.value.message == (
        "paymentPayload.payload.authorization.nonce: expected 0x followed by 64 hex digits"
    )


def test_requirement_errors_report_invalid_payment_requirements() -> None:
    body = docs.verify_request_v1()
    body["paymentRequirements"]["maxAmountRequired"] = "-5"
    with pytest.raises(WireError) as caught:
        parse_settle_request(body)
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS
    assert caught.value.path == "paymentRequirements.maxAmountRequired"


@pytest.mark.parametrize(
    ("body", "reason", "message"),
    [
        ([], Reason.INVALID_PAYLOAD, "expected a JSON object, got an array"),
        ("{}", Reason.INVALID_PAYLOAD, "expected a JSON object, got a string"),
        ({}, Reason.INVALID_X402_VERSION, "x402Version: required field is missing"),
        (
            {"x402Version": 3},
            Reason.INVALID_X402_VERSION,
            "x402Version: unsupported version 3 (supported: 1, 2)",
        ),
        (
            {"x402Version": 10**30},
            Reason.INVALID_X402_VERSION,
            "x402Version: unsupported version (supported: 1, 2)",
        ),
        (
            {"x402Version": True},
            Reason.INVALID_X402_VERSION,
            "x402Version: expected an integer, got a boolean",
        ),
        ({"x402Version": 2.0}, Reason.INVALID_X402_VERSION, "x402Version: expected an integer, got a number"),
        (
            {"x402Version": 2},
            Reason.INVALID_PAYLOAD,
            "paymentPayload: required field is missing (and 1 more problem)",
        ),
        (
            {"x402Version": 2, "paymentPayload": docs.payment_payload_v2()},
            Reason.INVALID_PAYMENT_REQUIREMENTS,
            "paymentRequirements: required field is missing",
        ),
        (
            docs.verify_request_v2() | {"idempotencyKey": "k"},
            Reason.INVALID_PAYLOAD,
            "idempotencyKey: unknown field",
        ),
    ],
)
def test_body_level_errors(body: object, reason: Reason, message: str) -> None:
    for parse in PARSERS:
        with pytest.raises(WireError) as caught:
            parse(body)
        assert (caught.value.reason, caught.value.message) == (reason, message)
