"""v1 ↔ v2 conversions used to keep the facilitator core on v2 shapes."""

from __future__ import annotations

import pytest

from a2a_x402.facilitator.wire import (
    PaymentPayloadV1,
    PaymentRequirements,
    PaymentRequirementsV1,
    Reason,
    ResourceInfo,
    SettleResponse,
    VerifyResponse,
    VerifyResponseV1,
    WireError,
    parse_settle_request,
    parse_verify_request,
    payload_v1_to_v2,
    request_to_v2,
    requirements_v1_to_v2,
    requirements_v2_to_v1,
    resource_info_from_v1,
    settle_response_to_v1,
    verify_response_to_v1,
)

from . import documents as docs


def test_requirements_v1_to_v2() -> None:
    converted = requirements_v1_to_v2(PaymentRequirementsV1.from_wire(docs.requirements_v1()))
    assert converted.to_json_dict() == docs.requirements_v2() | {"maxTimeoutSeconds": 600}


def test_resource_info_from_v1() -> None:
    info = resource_info_from_v1(PaymentRequirementsV1.from_wire(docs.requirements_v1()))
    assert info.to_json_dict() == docs.resource()


def test_requirements_round_trip_v2_to_v1_and_back() -> None:
    requirements = PaymentRequirements.from_wire(docs.requirements_v2())
    resource = ResourceInfo.from_wire(docs.resource())
    v1 = requirements_v2_to_v1(requirements, resource)
    expected = docs.requirements_v1() | {"maxTimeoutSeconds": 60}
    del expected["outputSchema"]
    assert v1.to_json_dict() == expected
    assert requirements_v1_to_v2(v1) == requirements


def test_requirements_v2_to_v1_without_description_gives_empty_ones() -> None:
    requirements = PaymentRequirements.from_wire(docs.requirements_v2())
    v1 = requirements_v2_to_v1(requirements, ResourceInfo(url="https://merchant.example/x"))
    assert v1.description == "" and v1.mime_type == ""
    # Present on the wire, empty: v1 payers refuse requirements without them.
    assert (v1.to_json_dict()["description"], v1.to_json_dict()["mimeType"]) == ("", "")


def test_requirements_on_a_chain_without_v1_name_cannot_go_to_v1() -> None:
    requirements = PaymentRequirements.from_wire(docs.requirements_v2() | {"network": "eip155:31337"})
    with pytest.raises(WireError) as caught:
        requirements_v2_to_v1(requirements, ResourceInfo(url="https://merchant.example/x"))
    assert caught.value.reason is Reason.INVALID_NETWORK


def test_payload_v1_to_v2_takes_scheme_and_network_from_the_payload() -> None:
    requirements = PaymentRequirements.from_wire(docs.requirements_v2())
    matching = payload_v1_to_v2(PaymentPayloadV1.from_wire(docs.payment_payload_v1()), requirements)
    assert matching.accepted == requirements
    assert matching.payload.to_json_dict() == docs.exact_payload()
    assert matching.x402_version == 2

    other_chain = PaymentPayloadV1.from_wire(docs.payment_payload_v1() | {"network": "base"})
    mismatched = payload_v1_to_v2(other_chain, requirements)
    # The core must still see the mismatch, so it is not papered over.
    assert mismatched.accepted.network == "eip155:8453"
    assert mismatched.accepted.model_copy(update={"network": requirements.network}) == requirements


def test_request_to_v2_for_both_versions() -> None:
    v2_body = parse_verify_request(docs.verify_request_v2())
    payload, requirements = request_to_v2(v2_body)
    assert payload is v2_body.payment_payload and requirements is v2_body.payment_requirements

    v1_body = parse_settle_request(docs.verify_request_v1())
    payload, requirements = request_to_v2(v1_body)
    assert requirements.network == "eip155:84532" and requirements.amount == 10000
    assert payload.accepted == requirements
    assert payload.payload == v1_body.payment_payload.payload


def test_verify_response_to_v1_drops_v2_only_fields() -> None:
    response = VerifyResponse(
        is_valid=False,
        invalid_reason=Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE,
        invalid_message="balance 5 < 10000",
        payer=docs.PAYER,
        extensions={"x": {}},
    )
    assert verify_response_to_v1(response) == VerifyResponseV1(
        is_valid=False,
        invalid_reason="invalid_exact_evm_insufficient_balance",
        invalid_message="balance 5 < 10000",
        payer=docs.PAYER,
    )


def test_settle_response_to_v1_names_the_network_by_its_v1_name() -> None:
    response = SettleResponse.from_wire(docs.settle_success_v2() | {"amount": "10000"})
    assert settle_response_to_v1(response).to_json_dict() == {
        "success": True,
        "payer": docs.PAYER,
        "transaction": docs.TX_HASH,
        "network": "base-sepolia",
    }
    failed = SettleResponse(
        success=False, error_reason=Reason.TRANSACTION_FAILED, transaction="", network="eip155:8453"
    )
    assert settle_response_to_v1(failed).to_json_dict() == {
        "success": False,
        "errorReason": "transaction_failed",
        "transaction": "",
        "network": "base",
    }


def test_settle_response_on_a_chain_without_v1_name_cannot_go_to_v1() -> None:
    response = SettleResponse.from_wire(docs.settle_success_v2() | {"network": "eip155:31337"})
    with pytest.raises(WireError, match="chain 31337 has no x402 v1 network name"):
        settle_response_to_v1(response)
