"""x402 v1 documents as a2a-x402 v0.2 (A2A 0.3) clients and merchants exchange them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from a2a_x402.facilitator.wire import (
    PaymentPayloadV1,
    PaymentRequiredV1,
    PaymentRequirementsV1,
    Reason,
    SettleResponseV1,
    VerifyResponseV1,
    WireError,
)

from . import documents as docs


def _compact(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"))


@pytest.mark.parametrize(
    ("model", "doc"),
    [
        (PaymentRequirementsV1, docs.requirements_v1()),
        (PaymentRequiredV1, docs.payment_required_v1()),
        (PaymentPayloadV1, docs.payment_payload_v1()),
        (VerifyResponseV1, {"isValid": True, "payer": docs.PAYER}),
        (
            SettleResponseV1,
            {
                "success": True,
                "payer": docs.PAYER,
                "transaction": docs.TX_HASH,
                "network": "base-sepolia",
            },
        ),
    ],
)
def test_v1_documents_round_trip_byte_for_byte(model: type[PaymentRequiredV1], doc: dict[str, Any]) -> None:
    assert _compact(model.from_wire(doc).to_json_dict()) == _compact(doc)


def test_a2a_x402_receipts_with_nulls_and_free_text_reasons_parse() -> None:
    # The a2a-x402 Python package dumps without exclude_none and writes prose into errorReason.
    receipt = {
        "success": False,
        "errorReason": "Payment authorization was submitted after its 'validBefore' timestamp.",
        "transaction": None,
        "network": "base",
        "payer": None,
    }
    parsed = SettleResponseV1.from_wire(receipt)
    assert parsed.transaction is None
    assert parsed.to_json_dict() == {
        "success": False,
        "errorReason": receipt["errorReason"],
        "network": "base",
    }


def test_a2a_x402_requirements_with_null_optionals_parse() -> None:
    doc = docs.requirements_v1() | {"mimeType": None, "outputSchema": None, "extra": None}
    parsed = PaymentRequirementsV1.from_wire(doc)
    assert (parsed.mime_type, parsed.output_schema, parsed.extra) == (None, None, None)
    assert parsed.chain_id == 84532


@pytest.mark.parametrize("transaction", [None, ""])
def test_successful_v1_settlement_must_name_its_transaction(transaction: str | None) -> None:
    doc: dict[str, Any] = {"success": True, "network": "base"}
    if transaction is not None:
        doc["transaction"] = transaction
    with pytest.raises(
        WireError, match="^transaction: a successful settlement must name its transaction hash$"
    ):
        SettleResponseV1.from_wire(doc)


def test_v1_requirements_need_a_description_but_it_may_be_empty() -> None:
    doc = docs.requirements_v1()
    doc["description"] = ""
    assert PaymentRequirementsV1.from_wire(doc).description == ""
    del doc["description"]
    with pytest.raises(WireError, match="^description: required field is missing$") as caught:
        PaymentRequirementsV1.from_wire(doc)
    assert caught.value.reason is Reason.INVALID_PAYMENT_REQUIREMENTS


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"network": "eip155:84532"}, "network: unknown x402 v1 network name"),
        ({"maxAmountRequired": 10000}, "maxAmountRequired: expected a decimal string, got an integer"),
        ({"amount": "10000"}, "amount: unknown field"),
        ({"outputSchema": {"a": "x" * 17000}}, "outputSchema: too large (at most 16384 bytes of JSON)"),
        ({"mimeType": "m" * 129}, "mimeType: too long (at most 128 characters)"),
        ({"description": "d" * 1025}, "description: too long (at most 1024 characters)"),
    ],
)
def test_v1_requirements_errors(change: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError) as caught:
        PaymentRequirementsV1.from_wire(docs.requirements_v1() | change)
    assert caught.value.message == message


def test_v2_payload_is_not_a_v1_payload() -> None:
    with pytest.raises(WireError) as caught:
        PaymentPayloadV1.from_wire(docs.payment_payload_v2())
    assert caught.value.reason is Reason.INVALID_X402_VERSION
    assert caught.value.message.startswith("x402Version: expected 1, got 2")


@pytest.mark.parametrize("version", [True, 1.0, "1", None])
def test_v1_version_must_be_the_integer_1(version: object) -> None:
    with pytest.raises(WireError) as caught:
        PaymentRequiredV1.from_wire(docs.payment_required_v1() | {"x402Version": version})
    assert caught.value.reason is Reason.INVALID_X402_VERSION
    assert caught.value.path == "x402Version"
