"""The HTTP service as the remote facilitator of the official x402 Python SDK (x402 2.25).

The SDK's `HTTPFacilitatorClient` reads our answers to requests we cannot parse as the operation's own
answers (a reason, a message, the payer), and a FastAPI app protected by the SDK's payment middleware,
with our service as its facilitator, asks for payment, serves a payment made with the SDK's httpx client,
refuses its replay without a second transfer, and tells the paying client why a malformed payment failed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from x402 import x402Client, x402ClientSync, x402ResourceServer
from x402.http import FacilitatorConfig, HTTPFacilitatorClient
from x402.http.clients import x402HttpxClient
from x402.http.facilitator_client_base import CreateHeadersAuthProvider
from x402.http.middleware.fastapi import payment_middleware
from x402.http.utils import (
    decode_payment_required_header,
    decode_payment_response_header,
    encode_payment_signature_header,
)
from x402.mechanisms.evm.exact import register_exact_evm_server
from x402.schemas import PaymentPayload, PaymentRequired, ResourceInfo

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ApiKeyStore
from a2a_x402.facilitator.wire import Reason
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO

from .conftest import StartService
from .payments import claim_rows, relayer_nonce
from .x402_sdk import AMOUNT, changed, dump, sdk_requirements, signer_client

CONTENT = "the paid content"


AUTH = "payload.authorization"
MALFORMED: dict[str, tuple[str, object, str]] = {
    "a 31-byte nonce": (f"{AUTH}.nonce", "0x" + "ab" * 31, "paymentPayload.payload.authorization.nonce"),
    "a number where a string belongs": (
        f"{AUTH}.value",
        AMOUNT,
        "paymentPayload.payload.authorization.value",
    ),
    "an unknown field": (f"{AUTH}.memo", "hi", "paymentPayload.payload.authorization.memo"),
    "a missing field": (f"{AUTH}.validAfter", ..., "paymentPayload.payload.authorization.validAfter"),
}


@pytest.mark.parametrize("case", MALFORMED.values(), ids=MALFORMED.keys())
async def test_the_sdk_facilitator_client_reads_our_answers_to_malformed_requests(
    case: tuple[str, object, str],
    chain: DevChain,
    start_service: StartService,
    new_payer: Callable[..., str],
    sqlite_url: str,
) -> None:
    path, value, wire_path = case
    base_url = start_service(sqlite_url)
    requirements = sdk_requirements(chain)
    required = PaymentRequired(
        resource=ResourceInfo(url="https://merchant.example/a2a"), accepts=[requirements]
    )
    payload = dump(signer_client(x402ClientSync(), new_payer()).create_payment_payload(required))
    broken = json.dumps(changed(payload, path, value)).encode()
    requirements_bytes = json.dumps(dump(requirements)).encode()
    nonce_before = relayer_nonce(chain)

    async with HTTPFacilitatorClient(FacilitatorConfig(url=base_url)) as facilitator:
        verified = await facilitator.verify_from_bytes(broken, requirements_bytes)
        settled = await facilitator.settle_from_bytes(broken, requirements_bytes)

    payer = payload["payload"]["authorization"]["from"]
    assert (verified.is_valid, verified.invalid_reason, verified.payer) == (
        False,
        Reason.INVALID_PAYLOAD,
        payer,
    )
    assert (verified.invalid_message or "").startswith(wire_path + ": ")
    assert (settled.success, settled.error_reason, settled.transaction) == (False, Reason.INVALID_PAYLOAD, "")
    assert (settled.network, settled.payer, settled.error_message) == (
        chain.network,
        payer,
        verified.invalid_message,
    )
    assert relayer_nonce(chain) == nonce_before
    assert await claim_rows(sqlite_url) == []


@pytest.fixture
async def paid_resource(
    chain: DevChain, start_service: StartService, asgi_server: Callable[..., str], sqlite_url: str
) -> AsyncIterator[str]:
    """`GET /paid` on a FastAPI app behind the SDK's payment middleware, with our service as facilitator:
    API keys required, the middleware presenting its own through the SDK's auth provider."""
    engine = create_engine(sqlite_url)
    try:
        _record, key = await ApiKeyStore(engine).create("sdk middleware")
    finally:
        await engine.dispose()
    bearer = {"Authorization": f"Bearer {key}"}
    auth = CreateHeadersAuthProvider(lambda: {"verify": bearer, "settle": bearer})
    config = FacilitatorConfig(url=start_service(sqlite_url, facilitator_public=False), auth_provider=auth)
    server = x402ResourceServer(HTTPFacilitatorClient(config))
    register_exact_evm_server(server, networks=chain.network)
    price = {
        "amount": str(AMOUNT),
        "asset": chain.asset,
        "extra": {"name": chain.asset_name, "version": chain.asset_version},
    }
    routes: Any = {
        "GET /paid": {
            "accepts": {"scheme": "exact", "payTo": PAY_TO, "price": price, "network": chain.network},
            "description": "a paid resource",
        }
    }
    app = FastAPI()
    app.middleware("http")(payment_middleware(routes, server))

    @app.get("/paid")
    async def paid() -> dict[str, str]:
        return {"content": CONTENT}

    yield asgi_server(app) + "/paid"


def _required_of(response: httpx.Response) -> PaymentRequired:
    required = decode_payment_required_header(response.headers["PAYMENT-REQUIRED"])
    assert isinstance(required, PaymentRequired)
    return required


async def test_unpaid_is_a_402_and_the_sdk_client_pays_for_a_200(
    chain: DevChain, paid_resource: str, new_payer: Callable[..., str]
) -> None:
    payee_before = chain.balance_of(PAY_TO)

    async with httpx.AsyncClient(timeout=HANG_S) as plain:
        unpaid = await plain.get(paid_resource)
    async with x402HttpxClient(signer_client(x402Client(), new_payer()), timeout=60) as paying:
        paid = await paying.get(paid_resource)

    [offered] = _required_of(unpaid).accepts
    assert unpaid.status_code == 402
    assert (offered.pay_to, offered.amount, offered.asset) == (PAY_TO, str(AMOUNT), chain.asset)
    assert CONTENT not in unpaid.text
    assert (paid.status_code, paid.json()) == (200, {"content": CONTENT})
    receipt = decode_payment_response_header(paid.headers["PAYMENT-RESPONSE"])
    assert (receipt.success, receipt.network) == (True, chain.network)
    assert int(chain.rpc.call("eth_getTransactionReceipt", [receipt.transaction])["status"], 16) == 1
    assert chain.balance_of(PAY_TO) == payee_before + AMOUNT


async def test_a_replayed_payment_is_a_402_and_moves_no_money(
    chain: DevChain, paid_resource: str, new_payer: Callable[..., str]
) -> None:
    async with httpx.AsyncClient(timeout=HANG_S) as plain:
        required = _required_of(await plain.get(paid_resource))
        payload = signer_client(x402ClientSync(), new_payer()).create_payment_payload(required)
        header = {"PAYMENT-SIGNATURE": encode_payment_signature_header(payload)}
        first = await plain.get(paid_resource, headers=header)
        nonce_after_first, payee_after_first = relayer_nonce(chain), chain.balance_of(PAY_TO)
        replay = await plain.get(paid_resource, headers=header)

    assert first.status_code == 200 and "PAYMENT-RESPONSE" in first.headers
    assert replay.status_code == 402
    assert CONTENT not in replay.text
    assert _required_of(replay).error == Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED
    assert (relayer_nonce(chain), chain.balance_of(PAY_TO)) == (nonce_after_first, payee_after_first)


@pytest.mark.parametrize("case", MALFORMED.values(), ids=MALFORMED.keys())
async def test_the_paying_client_sees_why_a_malformed_payment_failed(
    case: tuple[str, object, str], chain: DevChain, paid_resource: str, new_payer: Callable[..., str]
) -> None:
    path, value, _ = case
    async with httpx.AsyncClient(timeout=HANG_S) as plain:
        required = _required_of(await plain.get(paid_resource))
        payload = signer_client(x402ClientSync(), new_payer()).create_payment_payload(required)
        broken = PaymentPayload.model_validate(changed(dump(payload), path, value))
        nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)
        refused = await plain.get(
            paid_resource, headers={"PAYMENT-SIGNATURE": encode_payment_signature_header(broken)}
        )

    assert refused.status_code == 402
    assert CONTENT not in refused.text
    assert _required_of(refused).error == Reason.INVALID_PAYLOAD
    assert (relayer_nonce(chain), chain.balance_of(PAY_TO)) == (nonce_before, payee_before)
