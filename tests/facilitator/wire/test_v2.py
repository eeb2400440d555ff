"""x402 v2 documents: byte-for-byte round trips and the shape rules of each model."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from a2a_x402.facilitator.wire import (
    ExactEvmPayload,
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    Reason,
    ResourceInfo,
    SettleResponse,
    SupportedResponse,
    VerifyResponse,
    WireError,
    WireModel,
)

from . import documents as docs


def _compact(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


ROUND_TRIPS: list[tuple[type[WireModel], Callable[[], dict[str, Any]]]] = [
    (PaymentRequirements, docs.requirements_v2),
    (PaymentRequired, docs.payment_required_v2),
    (PaymentPayload, docs.payment_payload_v2),
    (SettleResponse, docs.settle_success_v2),
    (SupportedResponse, docs.supported_v2),
    (
        PaymentRequired,
        lambda: {
            "x402Version": 2,
            "resource": docs.resource()
            | {"serviceName": "Image studio", "tags": ["images", "ai"], "iconUrl": "https://x.example/i.png"},
            "accepts": [docs.requirements_v2(), docs.requirements_v2() | {"network": "eip155:8453"}],
        },
    ),
    (VerifyResponse, lambda: {"isValid": True, "payer": docs.PAYER}),
    (
        VerifyResponse,
        lambda: {
            "isValid": False,
            "invalidReason": Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE.value,
            "invalidMessage": "the signature does not recover to authorization.from",
            "payer": docs.PAYER,
        },
    ),
    (
        SettleResponse,
        lambda: {
            "success": False,
            "errorReason": "settlement_pending",
            "payer": docs.PAYER,
            "transaction": docs.TX_HASH,
            "network": "eip155:84532",
        },
    ),
    (
        SettleResponse,
        lambda: {
            "success": False,
            "errorReason": "transaction_failed",
            "transaction": "",
            "network": "eip155:1",
        },
    ),
    (SupportedResponse, lambda: {"kinds": [], "extensions": [], "signers": {}}),
]


@pytest.mark.parametrize(("model", "make"), ROUND_TRIPS)
def test_documents_round_trip_byte_for_byte(
    model: type[WireModel], make: Callable[[], dict[str, Any]]
) -> None:
    doc = make()
    assert _compact(model.from_wire(doc).to_json_dict()) == _compact(doc)


def test_python_values_are_typed() -> None:
    payload = PaymentPayload.from_wire(docs.payment_payload_v2())
    auth = payload.payload.authorization
    assert auth.from_address == docs.PAYER
    assert (auth.value, auth.valid_after, auth.valid_before) == (10000, 0, 1796015019)
    assert payload.accepted.amount == 10000
    assert payload.accepted.chain_id == 84532


def test_models_are_frozen() -> None:
    requirements = PaymentRequirements.from_wire(docs.requirements_v2())
    with pytest.raises(ValidationError):
        requirements.amount = 1  # type: ignore[misc]  # assigning to a frozen model is what is tested


def test_models_can_be_built_in_code_with_snake_case_and_ints() -> None:
    built = PaymentRequirements(
        scheme="exact",
        network="eip155:84532",
        asset=docs.USDC_BASE_SEPOLIA.lower(),
        amount=10000,
        pay_to=docs.MERCHANT,
        max_timeout_seconds=60,
        extra={"name": "USDC", "version": "2"},
    )
    assert built.to_json_dict() == docs.requirements_v2()
    response = VerifyResponse(is_valid=False, invalid_reason=Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED)
    assert type(response.invalid_reason) is str
    assert response.to_json_dict() == {
        "isValid": False,
        "invalidReason": "invalid_exact_evm_nonce_already_used",
    }


def test_snake_case_names_are_refused_on_the_wire() -> None:
    doc = docs.requirements_v2()
    doc["pay_to"] = doc.pop("payTo")
    with pytest.raises(WireError) as caught:
        PaymentRequirements.from_wire(doc)
    assert caught.value.message == "payTo: required field is missing (and 1 more problem)"


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(WireError, match=r"^accepted\.maxAmountRequired: unknown field$"):
        PaymentPayload.from_wire(
            docs.payment_payload_v2() | {"accepted": docs.requirements_v2() | {"maxAmountRequired": "1"}}
        )


@pytest.mark.parametrize("field", ["scheme", "network", "asset", "amount", "payTo", "maxTimeoutSeconds"])
def test_required_requirement_fields(field: str) -> None:
    doc = docs.requirements_v2()
    del doc[field]
    with pytest.raises(WireError, match=f"^{field}: required field is missing$"):
        PaymentRequirements.from_wire(doc)


@pytest.mark.parametrize("field", ["from", "to", "value", "validAfter", "validBefore", "nonce"])
def test_required_authorization_fields(field: str) -> None:
    doc = docs.payment_payload_v2()
    del doc["payload"]["authorization"][field]
    with pytest.raises(WireError) as caught:
        PaymentPayload.from_wire(doc)
    assert caught.value.message == f"payload.authorization.{field}: required field is missing"
    assert caught.value.reason is Reason.INVALID_PAYLOAD


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"payload": []}, "payload: expected an object, got an array"),
        (
            {"payload": {"authorization": docs.authorization()}},
            "payload.signature: required field is missing",
        ),
        ({"accepted": "exact"}, "accepted: expected an object, got a string"),
        ({"resource": {"url": ""}}, "resource.url: must not be empty"),
        ({"resource": {"url": "u" * 2049}}, "resource.url: too long (at most 2048 characters)"),
        ({"extensions": {"k": "v" * 17000}}, "extensions: too large (at most 16384 bytes of JSON)"),
        ({"x402Version": "2"}, "x402Version: expected the integer 2, got a string"),
    ],
)
def test_payload_shape_errors(change: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError) as caught:
        PaymentPayload.from_wire(docs.payment_payload_v2() | change)
    assert caught.value.message == message


def test_permit2_payload_is_refused_with_a_clear_message() -> None:
    permit2 = {"signature": docs.EOA_SIGNATURE, "permit2Authorization": {"from": docs.PAYER}}
    with pytest.raises(WireError) as caught:
        ExactEvmPayload.from_wire(permit2)
    assert caught.value.message == "Permit2 payloads are not supported; expected an EIP-3009 authorization"


def test_payment_required_needs_resource_and_at_least_one_accept() -> None:
    doc = docs.payment_required_v2()
    del doc["resource"]
    with pytest.raises(WireError, match="^resource: required field is missing$"):
        PaymentRequired.from_wire(doc)
    with pytest.raises(WireError, match=r"^accepts: too few items \(at least 1\)$") as caught:
        PaymentRequired.from_wire(docs.payment_required_v2() | {"accepts": []})
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS
    with pytest.raises(WireError, match=r"^accepts: too many items \(at most 32\)$"):
        PaymentRequired.from_wire(docs.payment_required_v2() | {"accepts": [docs.requirements_v2()] * 33})


def test_errors_inside_accepts_name_the_index() -> None:
    bad = docs.requirements_v2() | {"asset": "0x1234"}
    with pytest.raises(WireError) as caught:
        PaymentRequired.from_wire(docs.payment_required_v2() | {"accepts": [docs.requirements_v2(), bad]})
    assert caught.value.path == "accepts[1].asset"


def test_resource_tags_are_bounded() -> None:
    with pytest.raises(WireError, match=r"^tags: too many items \(at most 5\)$"):
        ResourceInfo.from_wire({"url": "https://x.example", "tags": ["a"] * 6})
    with pytest.raises(WireError, match=r"^tags\[0\]: too long \(at most 32 characters\)$"):
        ResourceInfo.from_wire({"url": "https://x.example", "tags": ["a" * 33]})


def test_verify_response_types() -> None:
    with pytest.raises(WireError, match="^isValid: expected a boolean, got a string$"):
        VerifyResponse.from_wire({"isValid": "true"})
    with pytest.raises(WireError, match="^isValid: expected a boolean, got an integer$"):
        VerifyResponse.from_wire({"isValid": 1})
    with pytest.raises(WireError, match="^invalidReason: must not be empty$"):
        VerifyResponse.from_wire({"isValid": False, "invalidReason": ""})


def test_verify_response_accepts_nulls_for_optional_fields() -> None:
    parsed = VerifyResponse.from_wire({"isValid": True, "invalidReason": None, "payer": docs.PAYER})
    assert parsed.to_json_dict() == {"isValid": True, "payer": docs.PAYER}


def test_successful_settlement_must_name_its_transaction() -> None:
    for unnamed in ({"transaction": ""}, {"transaction": "", "amount": None}):
        with pytest.raises(WireError) as caught:
            SettleResponse.from_wire(docs.settle_success_v2() | unnamed)
        assert caught.value.message == (
            "transaction: a successful settlement must name its transaction hash (only a settlement of 0 "
            "names none)"
        )


def test_a_settlement_of_nothing_names_no_transaction() -> None:
    """x402's `upto` scheme: an amount of 0 settles without a transaction."""
    wire = docs.settle_success_v2() | {"transaction": "", "amount": "0"}
    parsed = SettleResponse.from_wire(wire)
    assert (parsed.success, parsed.transaction, parsed.amount) == (True, "", 0)
    assert parsed.to_json_dict() == wire


@pytest.mark.parametrize(
    ("change", "path"),
    [({"network": ""}, "network"), ({"amount": 5}, "amount"), ({"transaction": "0x12"}, "transaction")],
)
def test_settle_response_field_errors(change: dict[str, Any], path: str) -> None:
    with pytest.raises(WireError) as caught:
        SettleResponse.from_wire(docs.settle_success_v2() | change)
    assert caught.value.path == path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ({"x402Version": 2, "scheme": "exact", "network": "base"}, "kinds[0].network: expected a CAIP-2"),
        (
            {"x402Version": 1, "scheme": "exact", "network": "eip155:8453"},
            "kinds[0].network: unknown x402 v1",
        ),
        (
            {"x402Version": 3, "scheme": "exact", "network": "eip155:8453"},
            "kinds[0].x402Version: expected 1 or 2",
        ),
        (
            {"x402Version": 2, "scheme": "exact", "network": 8453},
            "kinds[0].network: expected a network string",
        ),
    ],
)
def test_supported_kind_network_follows_its_version(kind: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError) as caught:
        SupportedResponse.from_wire({"kinds": [kind]})
    assert caught.value.message.startswith(message)


@pytest.mark.parametrize(
    ("signers", "path"),
    [
        ({"solana:*": [docs.RELAYER]}, "signers.solana:*"),
        ({"eip155:*": ["0xabc"]}, "signers.eip155:*[0]"),
        ({"eip155:*": [docs.RELAYER] * 17}, "signers.eip155:*"),
    ],
)
def test_supported_signers_are_eip155_addresses(signers: dict[str, Any], path: str) -> None:
    with pytest.raises(WireError) as caught:
        SupportedResponse.from_wire(docs.supported_v2() | {"signers": signers})
    assert caught.value.path.replace('"', "") == path


def test_v1_only_supported_answer_gets_empty_defaults() -> None:
    parsed = SupportedResponse.from_wire(
        {"kinds": [{"x402Version": 1, "scheme": "exact", "network": "base"}]}
    )
    assert parsed.extensions == () and parsed.signers == {}
