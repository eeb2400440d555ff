"""Entry points for payloads, requirements and 402 bodies of either version."""

from __future__ import annotations

import pytest

from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentPayloadV1,
    PaymentRequired,
    PaymentRequiredV1,
    PaymentRequirements,
    PaymentRequirementsV1,
    Reason,
    WireError,
    parse_payment_payload,
    parse_payment_required,
    parse_payment_requirements,
)

from . import documents as docs


def test_payment_payload_dispatches_on_version() -> None:
    assert type(parse_payment_payload(docs.payment_payload_v2())) is PaymentPayload
    assert type(parse_payment_payload(docs.payment_payload_v1())) is PaymentPayloadV1


def test_payment_required_dispatches_on_version() -> None:
    assert type(parse_payment_required(docs.payment_required_v2())) is PaymentRequired
    assert type(parse_payment_required(docs.payment_required_v1())) is PaymentRequiredV1


def test_payment_requirements_take_the_version_from_the_caller() -> None:
    assert type(parse_payment_requirements(docs.requirements_v2(), 2)) is PaymentRequirements
    assert type(parse_payment_requirements(docs.requirements_v1(), 1)) is PaymentRequirementsV1
    with pytest.raises(WireError) as caught:
        parse_payment_requirements(docs.requirements_v1(), 2)
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS


@pytest.mark.parametrize("version", [0, 3, True])
def test_payment_requirements_refuse_an_unknown_version(version: int) -> None:
    with pytest.raises(WireError) as caught:
        parse_payment_requirements(docs.requirements_v2(), version)
    assert caught.value.reason is Reason.INVALID_X402_VERSION


def test_v2_shaped_payload_claiming_version_1_is_parsed_as_v1_and_refused() -> None:
    with pytest.raises(WireError) as caught:
        parse_payment_payload(docs.payment_payload_v2() | {"x402Version": 1})
    assert caught.value.reason is Reason.INVALID_PAYLOAD
    assert caught.value.message == "scheme: required field is missing (and 3 more problems)"


def test_payment_required_errors_are_requirement_errors() -> None:
    doc = docs.payment_required_v1()
    doc["accepts"][0]["payTo"] = "0x" + "Zz" * 20
    with pytest.raises(WireError) as caught:
        parse_payment_required(doc)
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS
    assert caught.value.path == "accepts[0].payTo"
    with pytest.raises(WireError) as caught:
        parse_payment_required(None)
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS
    assert caught.value.message == "expected a JSON object, got null"


@pytest.mark.parametrize("bad_version", [None, "2", [2], {"v": 2}])
def test_wrong_version_types_are_version_errors(bad_version: object) -> None:
    for parse in (parse_payment_payload, parse_payment_required):
        with pytest.raises(WireError) as caught:
            parse({"x402Version": bad_version})
        assert caught.value.reason is Reason.INVALID_X402_VERSION
