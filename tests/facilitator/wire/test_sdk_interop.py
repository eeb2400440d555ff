"""Interop with the official x402 Python SDK (x402 2.25, a test dependency).

Payloads signed by the SDK's client parse with our types and dump back byte for byte; our
answers parse with the SDK's models, both directly and over real HTTP through its facilitator
client talking to a small server on 127.0.0.1 that uses our parse entry points.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from eth_account import Account
from x402 import x402ClientSync
from x402.http import FacilitatorConfig, HTTPFacilitatorClientSync
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.schemas import PaymentPayload as SdkPaymentPayload
from x402.schemas import PaymentRequired as SdkPaymentRequired
from x402.schemas import PaymentRequirements as SdkPaymentRequirements
from x402.schemas import ResourceInfo as SdkResourceInfo
from x402.schemas import SettleResponse as SdkSettleResponse
from x402.schemas import SupportedResponse as SdkSupportedResponse
from x402.schemas import VerifyResponse as SdkVerifyResponse
from x402.schemas.v1 import PaymentPayloadV1 as SdkPaymentPayloadV1
from x402.schemas.v1 import PaymentRequiredV1 as SdkPaymentRequiredV1
from x402.schemas.v1 import PaymentRequirementsV1 as SdkPaymentRequirementsV1

from a2a_x402.facilitator.wire import (
    ExactEvmPayload,
    PaymentPayload,
    PaymentPayloadV1,
    PaymentRequired,
    Reason,
    SettleRequest,
    SettleRequestV1,
    SettleResponse,
    SupportedKind,
    SupportedResponse,
    VerifyRequest,
    VerifyRequestV1,
    VerifyResponse,
    WireError,
    parse_payment_payload,
    parse_payment_required,
    parse_settle_request,
    parse_verify_request,
    settle_response_to_v1,
    verify_response_to_v1,
)

from . import documents as docs

# The address anvil gives the first contract deployed by its first dev account: a stand-in for
# the project's test token, which is not among the SDK's default assets.
LOCAL_ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def _sdk_dump(model: Any) -> dict[str, Any]:
    # The exact call the SDK's HTTP clients use before sending a document.
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def _compact(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"))


@pytest.fixture
def sdk_client() -> x402ClientSync:
    client = register_exact_evm_client(x402ClientSync(), EthAccountSigner(Account.create()))
    # Spend controls only allow the SDK's known USDC deployments; the local token is not one.
    client.set_spend_controls(False)
    return client


def _sdk_requirements_local() -> SdkPaymentRequirements:
    return SdkPaymentRequirements(
        scheme="exact",
        network="eip155:31337",
        asset=LOCAL_ASSET,
        amount="250000",
        pay_to=docs.MERCHANT,
        max_timeout_seconds=120,
        extra={"name": "Dev USD", "version": "2"},
    )


def _sdk_requirements_v1() -> SdkPaymentRequirementsV1:
    return SdkPaymentRequirementsV1(
        scheme="exact",
        network="base-sepolia",
        max_amount_required="10000",
        resource="https://merchant.example/a2a",
        description="Generate an image",
        mime_type="application/json",
        pay_to=docs.MERCHANT,
        max_timeout_seconds=600,
        asset=docs.USDC_BASE_SEPOLIA,
        extra={"name": "USDC", "version": "2"},
    )


def _sdk_payment_required() -> SdkPaymentRequired:
    return SdkPaymentRequired(
        resource=SdkResourceInfo(url="https://merchant.example/a2a", description="Generate an image"),
        accepts=[_sdk_requirements_local()],
    )


def test_sdk_v2_payload_parses_and_round_trips(sdk_client: x402ClientSync) -> None:
    sdk_payload = sdk_client.create_payment_payload(_sdk_payment_required())
    wire = _sdk_dump(sdk_payload)

    parsed = parse_payment_payload(wire)

    assert isinstance(parsed, PaymentPayload)
    auth = parsed.payload.authorization
    assert auth.value == 250000 and auth.to == docs.MERCHANT
    assert auth.valid_before > auth.valid_after
    assert len(bytes.fromhex(parsed.payload.signature[2:])) == 65
    assert parsed.accepted.chain_id == 31337
    assert _compact(parsed.to_json_dict()) == _compact(wire)


def test_sdk_v1_payload_parses_and_round_trips(sdk_client: x402ClientSync) -> None:
    sdk_payload = sdk_client.create_payment_payload(SdkPaymentRequiredV1(accepts=[_sdk_requirements_v1()]))
    wire = _sdk_dump(sdk_payload)

    parsed = parse_payment_payload(wire)

    assert isinstance(parsed, PaymentPayloadV1)
    assert parsed.network == "base-sepolia"
    assert _compact(parsed.to_json_dict()) == _compact(wire)


def test_sdk_payment_required_documents_parse() -> None:
    v2 = _sdk_dump(_sdk_payment_required())
    assert _compact(parse_payment_required(v2).to_json_dict()) == _compact(v2)
    v1 = _sdk_dump(SdkPaymentRequiredV1(error="Payment required", accepts=[_sdk_requirements_v1()]))
    assert _compact(parse_payment_required(v1).to_json_dict()) == _compact(v1)


def test_our_documents_parse_with_sdk_models() -> None:
    required = PaymentRequired.from_wire(docs.payment_required_v2())
    assert _sdk_dump(SdkPaymentRequired.model_validate(required.to_json_dict())) == required.to_json_dict()
    payload = PaymentPayload.from_wire(docs.payment_payload_v2())
    assert _sdk_dump(SdkPaymentPayload.model_validate(payload.to_json_dict())) == payload.to_json_dict()
    payload_v1 = PaymentPayloadV1.from_wire(docs.payment_payload_v1())
    assert (
        _sdk_dump(SdkPaymentPayloadV1.model_validate(payload_v1.to_json_dict())) == payload_v1.to_json_dict()
    )


RESPONSES: list[VerifyResponse | SettleResponse] = [
    VerifyResponse(is_valid=True, payer=docs.PAYER),
    VerifyResponse(
        is_valid=False,
        invalid_reason=Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE,
        invalid_message="validBefore is in the past",
        payer=docs.PAYER,
    ),
    SettleResponse(success=True, payer=docs.PAYER, transaction=docs.TX_HASH, network="eip155:84532"),
    SettleResponse(
        success=False,
        error_reason=Reason.SETTLEMENT_PENDING,
        payer=docs.PAYER,
        transaction=docs.TX_HASH,
        network="eip155:84532",
    ),
    SettleResponse(success=False, error_reason=Reason.INVALID_PAYLOAD, transaction="", network="eip155:8453"),
]


@pytest.mark.parametrize("ours", RESPONSES)
def test_our_responses_parse_with_sdk_models_and_back(ours: VerifyResponse | SettleResponse) -> None:
    sdk_model = SdkVerifyResponse if isinstance(ours, VerifyResponse) else SdkSettleResponse
    theirs = sdk_model.model_validate(ours.to_json_dict())
    assert _sdk_dump(theirs) == ours.to_json_dict()
    assert type(ours).from_wire(_sdk_dump(theirs)) == ours


def test_our_supported_response_parses_with_the_sdk_model() -> None:
    ours = SupportedResponse.from_wire(docs.supported_v2())
    theirs = SdkSupportedResponse.model_validate(ours.to_json_dict())
    assert [(k.x402_version, k.network) for k in theirs.kinds] == [(2, "eip155:84532"), (1, "base-sepolia")]
    assert theirs.signers == {"eip155:*": [docs.RELAYER]}
    assert _sdk_dump(theirs) == ours.to_json_dict()


class _Facilitator(BaseHTTPRequestHandler):
    """A facilitator stand-in: parses bodies with our entry points, answers with our models."""

    received: list[object] = []

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Keep test output quiet."""

    def _answer(self, document: dict[str, Any]) -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        supported = SupportedResponse(
            kinds=(
                SupportedKind(x402_version=2, scheme="exact", network="eip155:31337"),
                SupportedKind(x402_version=1, scheme="exact", network="base-sepolia"),
            ),
            signers={"eip155:*": (docs.RELAYER,)},
        )
        self._answer(supported.to_json_dict())

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parse = parse_verify_request if self.path == "/verify" else parse_settle_request
        try:
            request = parse(data)
        except WireError as exc:
            self._answer(
                VerifyResponse(
                    is_valid=False, invalid_reason=exc.reason, invalid_message=exc.message
                ).to_json_dict()
            )
            return
        self.received.append(request)
        signed = request.payment_payload.payload
        assert isinstance(signed, ExactEvmPayload)  # the SDK's exact client signs EIP-3009 here
        payer = signed.authorization.from_address
        if isinstance(request, VerifyRequest | VerifyRequestV1):
            verified = VerifyResponse(is_valid=True, payer=payer)
            answer = verified if isinstance(request, VerifyRequest) else verify_response_to_v1(verified)
            self._answer(answer.to_json_dict())
            return
        network = (
            "eip155:84532" if isinstance(request, SettleRequestV1) else request.payment_requirements.network
        )
        settled = SettleResponse(success=True, payer=payer, transaction=docs.TX_HASH, network=network)
        answer_settle = settled if isinstance(request, SettleRequest) else settle_response_to_v1(settled)
        self._answer(answer_settle.to_json_dict())


@pytest.fixture
def facilitator_url() -> Iterator[str]:
    _Facilitator.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Facilitator)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_sdk_facilitator_client_speaks_to_our_types_over_http(
    sdk_client: x402ClientSync, facilitator_url: str
) -> None:
    requirements = _sdk_requirements_local()
    payload = sdk_client.create_payment_payload(_sdk_payment_required())
    with HTTPFacilitatorClientSync(FacilitatorConfig(url=facilitator_url)) as facilitator:
        verified = facilitator.verify(payload, requirements)
        settled = facilitator.settle(payload, requirements)
        supported = facilitator.get_supported()

    payer = payload.payload["authorization"]["from"]
    assert (verified.is_valid, verified.payer) == (True, payer)
    assert (settled.success, settled.transaction, settled.network) == (True, docs.TX_HASH, "eip155:31337")
    assert [kind.network for kind in supported.kinds] == ["eip155:31337", "base-sepolia"]
    assert [type(r) for r in _Facilitator.received] == [VerifyRequest, SettleRequest]


def test_sdk_facilitator_client_speaks_v1_to_our_types_over_http(
    sdk_client: x402ClientSync, facilitator_url: str
) -> None:
    requirements = _sdk_requirements_v1()
    payload = sdk_client.create_payment_payload(SdkPaymentRequiredV1(accepts=[requirements]))
    with HTTPFacilitatorClientSync(FacilitatorConfig(url=facilitator_url)) as facilitator:
        verified = facilitator.verify(payload, requirements)
        settled = facilitator.settle(payload, requirements)

    assert verified.is_valid
    assert (settled.success, settled.network) == (True, "base-sepolia")
    assert [type(r) for r in _Facilitator.received] == [VerifyRequestV1, SettleRequestV1]


def test_sdk_client_gets_our_parse_error_as_an_invalid_verify(
    sdk_client: x402ClientSync, facilitator_url: str
) -> None:
    payload = sdk_client.create_payment_payload(_sdk_payment_required())
    tampered = payload.model_copy(update={"payload": payload.payload | {"signature": "0xnot-hex"}})
    with HTTPFacilitatorClientSync(FacilitatorConfig(url=facilitator_url)) as facilitator:
        verified = facilitator.verify(tampered, _sdk_requirements_local())

    assert not verified.is_valid
    assert verified.invalid_reason == "invalid_payload"
    assert verified.invalid_message is not None
    assert verified.invalid_message.startswith("paymentPayload.payload.signature: expected 0x")
    assert _Facilitator.received == []
