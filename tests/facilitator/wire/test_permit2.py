"""The Permit2 payloads of `exact` and `upto`: what the x402 SDK's clients send parses and dumps back byte for
byte; anything else is one `WireError` with the right reason and the offending field's path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_x402.facilitator.wire import (
    ExactPermit2PaymentPayload,
    ExactPermit2SettleRequest,
    ExactPermit2VerifyRequest,
    PaymentPayload,
    PaymentRequirements,
    Permit2Extra,
    Reason,
    UptoPaymentPayload,
    UptoSettleRequest,
    UptoVerifyRequest,
    WireError,
    parse_permit2_payment_payload,
    parse_settle_request,
    parse_verify_request,
    request_to_v2,
)
from tests.facilitator.permit2_payments import FACILITATOR, requirements, sdk_payment

from .test_properties import json_values, known_shaped


@pytest.fixture(scope="module")
def exact_payment() -> dict[str, Any]:
    return sdk_payment(requirements("exact"))


@pytest.fixture(scope="module")
def upto_payment() -> dict[str, Any]:
    return sdk_payment(requirements("upto"))


def _changed(document: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy with the field at dotted `path` set to `value` (removed when `value` is ...)."""
    result = copy.deepcopy(document)
    *parents, last = path.split(".")
    target = result
    for name in parents:
        target = target[name]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return result


def _refusal(document: object) -> WireError:
    with pytest.raises(WireError) as caught:
        parse_permit2_payment_payload(document)
    return caught.value


def test_the_sdk_exact_permit2_payment_parses_and_dumps_back(exact_payment: dict[str, Any]) -> None:
    parsed = parse_permit2_payment_payload(exact_payment)

    assert isinstance(parsed, ExactPermit2PaymentPayload)
    assert parsed.to_json_dict() == exact_payment
    authorization = parsed.payload.permit2_authorization
    assert authorization.spender == "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
    assert authorization.permitted.amount == 1_500_000
    assert isinstance(authorization.nonce, int) and authorization.nonce == int(
        exact_payment["payload"]["permit2Authorization"]["nonce"]
    )


def test_the_sdk_upto_payment_parses_and_dumps_back(upto_payment: dict[str, Any]) -> None:
    parsed = parse_permit2_payment_payload(upto_payment)

    assert isinstance(parsed, UptoPaymentPayload)
    assert parsed.to_json_dict() == upto_payment
    assert parsed.payload.permit2_authorization.witness.facilitator == FACILITATOR
    assert parsed.payload.permit2_authorization.spender == "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"


def test_addresses_given_in_lower_case_are_checksummed(exact_payment: dict[str, Any]) -> None:
    lowered = _changed(
        exact_payment, "payload.permit2Authorization.witness.to", requirements()["payTo"].lower()
    )

    parsed = parse_permit2_payment_payload(lowered)

    assert parsed.payload.permit2_authorization.witness.to == requirements()["payTo"]


def test_the_eip3009_payload_still_refuses_a_permit2_payment(exact_payment: dict[str, Any]) -> None:
    with pytest.raises(WireError) as caught:
        PaymentPayload.from_wire(exact_payment)

    assert caught.value.reason is Reason.INVALID_PAYLOAD
    assert "Permit2 payloads are not supported" in caught.value.message


def test_a_witness_of_the_other_scheme_is_refused(
    exact_payment: dict[str, Any], upto_payment: dict[str, Any]
) -> None:
    # An upto witness under an exact offer names a facilitator the exact proxy knows nothing of.
    upto_as_exact = _changed(upto_payment, "accepted", exact_payment["accepted"])
    exact_as_upto = _changed(exact_payment, "accepted", upto_payment["accepted"])

    first, second = _refusal(upto_as_exact), _refusal(exact_as_upto)

    assert (first.reason, first.path) == (
        Reason.INVALID_PAYLOAD,
        "payload.permit2Authorization.witness.facilitator",
    )
    assert first.message.endswith("unknown field")
    assert (second.reason, second.path) == (
        Reason.INVALID_PAYLOAD,
        "payload.permit2Authorization.witness.facilitator",
    )
    assert second.message.endswith("required field is missing")


def test_another_scheme_is_refused(exact_payment: dict[str, Any]) -> None:
    refusal = _refusal(_changed(exact_payment, "accepted.scheme", "batch"))

    assert refusal.reason is Reason.INVALID_PAYLOAD
    assert "accepted.scheme must be exact" in refusal.message


_AUTH = "payload.permit2Authorization"


@pytest.mark.parametrize(
    ("path", "value", "reason", "words"),
    [
        (f"{_AUTH}.nonce", 5, Reason.INVALID_PAYLOAD, "expected a decimal string, got an integer"),
        (f"{_AUTH}.nonce", "0x05", Reason.INVALID_PAYLOAD, "unsigned decimal integer string"),
        (f"{_AUTH}.nonce", str(2**256), Reason.INVALID_PAYLOAD, "out of range for uint256"),
        (f"{_AUTH}.deadline", "-1", Reason.INVALID_PAYLOAD, "no sign"),
        (f"{_AUTH}.permitted.amount", "01500000", Reason.INVALID_PAYLOAD, "leading zeros"),
        (f"{_AUTH}.permitted.amount", "1" * 79, Reason.INVALID_PAYLOAD, "at most 78 digits"),
        (f"{_AUTH}.witness.validAfter", 0, Reason.INVALID_PAYLOAD, "got an integer"),
        (
            f"{_AUTH}.permitted.token",
            "0x5fbDB2315678afecb367f032d93F642f64180aa3",
            Reason.INVALID_PAYLOAD,
            "EIP-55",
        ),
        (f"{_AUTH}.spender", "0x402085", Reason.INVALID_PAYLOAD, "40 hex digits"),
        (f"{_AUTH}.from", ..., Reason.INVALID_PAYLOAD, "required field is missing"),
        (f"{_AUTH}.witness.extra", {}, Reason.INVALID_PAYLOAD, "unknown field"),
        ("payload.signature", ..., Reason.INVALID_PAYLOAD, "required field is missing"),
        ("payload.signature", "0x123", Reason.INVALID_PAYLOAD, "even number of hex digits"),
        ("payload.signature", "0x" + "ab" * 4097, Reason.INVALID_PAYLOAD, "4096 bytes"),
        ("payload.authorization", {}, Reason.INVALID_PAYLOAD, "unknown field"),
        ("accepted.amount", 1500000, Reason.INVALID_PAYLOAD, "got an integer"),
        ("x402Version", 1, Reason.INVALID_X402_VERSION, "expected 2"),
    ],
)
def test_malformed_fields_are_refused_by_path(
    exact_payment: dict[str, Any], path: str, value: object, reason: Reason, words: str
) -> None:
    refusal = _refusal(_changed(exact_payment, path, value))

    assert refusal.reason is reason
    assert refusal.path == path
    assert words in refusal.message
    # Never the input itself: the refused value is not quoted back.
    if isinstance(value, str) and len(value) > 8:
        assert value not in refusal.message


def test_a_huge_signature_is_refused_without_being_quoted(exact_payment: dict[str, Any]) -> None:
    huge = "0x" + "ab" * 1_000_000

    refusal = _refusal(_changed(exact_payment, "payload.signature", huge))

    assert refusal.reason is Reason.INVALID_PAYLOAD
    assert len(refusal.message) < 300


def test_a_document_that_is_not_an_object_is_refused() -> None:
    documents: tuple[object, ...] = (None, [], "x", 2)
    for document in documents:
        assert _refusal(document).reason is Reason.INVALID_PAYLOAD


def test_the_permit2_keys_of_extra_are_read_and_the_others_ignored() -> None:
    upto = PaymentRequirements.from_wire(
        requirements("upto", extra={"facilitatorAddress": FACILITATOR.lower(), "x": 1})
    )
    plain = PaymentRequirements.from_wire(requirements("exact", extra=None))

    assert Permit2Extra.of(upto) == Permit2Extra(asset_transfer_method=None, facilitator_address=FACILITATOR)
    assert Permit2Extra.of(plain) == Permit2Extra()
    assert Permit2Extra.of(PaymentRequirements.from_wire(requirements())).asset_transfer_method == "permit2"


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("facilitatorAddress", "0x12", "40 hex digits"),
        ("facilitatorAddress", 7, "expected a string"),
        ("assetTransferMethod", ["permit2"], "expected a string"),
        ("assetTransferMethod", "Permit2", "lower-case"),
    ],
)
def test_malformed_permit2_keys_of_extra_are_refused(key: str, value: object, words: str) -> None:
    offer = PaymentRequirements.from_wire(requirements("upto", extra={key: value}))

    with pytest.raises(WireError) as caught:
        Permit2Extra.of(offer)

    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS
    assert caught.value.path == f"extra.{key}"
    assert words in caught.value.message
    assert caught.value.message.startswith(f"extra.{key}: ")


@settings(max_examples=300, deadline=None)
@given(document=json_values | known_shaped)
def test_any_json_is_parsed_or_refused_with_a_wire_error(document: object) -> None:
    try:
        parse_permit2_payment_payload(document)
    except WireError as refusal:
        assert refusal.reason in {Reason.INVALID_PAYLOAD, Reason.INVALID_X402_VERSION}


@settings(max_examples=200, deadline=None)
@given(
    path=st.sampled_from(
        [
            f"{_AUTH}.from",
            f"{_AUTH}.permitted",
            f"{_AUTH}.permitted.token",
            f"{_AUTH}.permitted.amount",
            f"{_AUTH}.spender",
            f"{_AUTH}.nonce",
            f"{_AUTH}.deadline",
            f"{_AUTH}.witness",
            f"{_AUTH}.witness.to",
            f"{_AUTH}.witness.facilitator",
            f"{_AUTH}.witness.validAfter",
            "payload.signature",
            "accepted.scheme",
        ]
    ),
    value=json_values,
)
def test_any_value_in_any_field_of_a_signed_upto_payment_is_parsed_or_refused(
    upto_payment: dict[str, Any], path: str, value: object
) -> None:
    try:
        parsed = parse_permit2_payment_payload(_changed(upto_payment, path, value))
    except WireError as refusal:
        assert refusal.reason is Reason.INVALID_PAYLOAD
    else:
        # What gets through is stable: its wire form parses back to the same document.
        assert parse_permit2_payment_payload(parsed.to_json_dict()) == parsed


@pytest.mark.parametrize(
    ("parse", "models"),
    [
        (parse_verify_request, (ExactPermit2VerifyRequest, UptoVerifyRequest)),
        (parse_settle_request, (ExactPermit2SettleRequest, UptoSettleRequest)),
    ],
)
def test_a_verify_or_settle_body_with_a_permit2_payment_is_read_by_its_scheme(
    parse: Callable[[object], Any],
    models: tuple[type, type],
    exact_payment: dict[str, Any],
    upto_payment: dict[str, Any],
) -> None:
    bodies = [
        {"x402Version": 2, "paymentPayload": payment, "paymentRequirements": requirements(scheme)}
        for payment, scheme in ((exact_payment, "exact"), (upto_payment, "upto"))
    ]

    parsed = [parse(body) for body in bodies]

    assert tuple(type(body) for body in parsed) == models
    assert [request_to_v2(body)[0].to_json_dict() for body in parsed] == [exact_payment, upto_payment]
