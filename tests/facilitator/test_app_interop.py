"""Interop of the HTTP service with the official x402 Python SDK (a test dependency): payloads the SDK's
client signs verify and settle on chain, our answers parse with the SDK's models, and the SDK's facilitator
client drives the service, in x402 v2 and v1."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import httpx
from eth_account import Account
from x402 import x402ClientSync
from x402.http import FacilitatorConfig, HTTPFacilitatorClient
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.exact import register_exact_evm_client
from x402.mechanisms.evm.types import TypedDataDomain, TypedDataField
from x402.schemas import (
    PaymentRequired,
    ResourceInfo,
    SettleResponse,
    SupportedResponse,
    VerifyResponse,
)
from x402.schemas.v1 import PaymentRequiredV1, PaymentRequirementsV1

from a2a_x402.devchain import DevChain, encode_call
from tests.fixtures.facilitator import PAY_TO

from .conftest import StartService
from .payments import claim_rows, relayer_nonce, wrap_erc6492
from .x402_sdk import AMOUNT, dump, sdk_requirements, signer_client


async def test_a_payment_signed_by_the_sdk_verifies_and_settles_and_our_answers_parse_with_its_models(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = sdk_requirements(chain)
    required = PaymentRequired(
        resource=ResourceInfo(url="https://merchant.example/a2a"), accepts=[requirements]
    )
    payload = signer_client(x402ClientSync(), new_payer()).create_payment_payload(required)
    body = {"x402Version": 2, "paymentPayload": dump(payload), "paymentRequirements": dump(requirements)}
    payer = payload.payload["authorization"]["from"]
    payee_before = chain.balance_of(PAY_TO)

    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        verified = VerifyResponse.model_validate_json((await client.post("/verify", json=body)).content)
        settled = SettleResponse.model_validate_json((await client.post("/settle", json=body)).content)
        supported = SupportedResponse.model_validate_json((await client.get("/supported")).content)

    assert (verified.is_valid, verified.payer) == (True, payer)
    assert (settled.success, settled.payer, settled.network) == (True, payer, chain.network)
    assert int(chain.rpc.call("eth_getTransactionReceipt", [settled.transaction])["status"], 16) == 1
    assert chain.balance_of(PAY_TO) == payee_before + AMOUNT
    assert [(k.x402_version, k.scheme, k.network) for k in supported.kinds] == [
        (2, "exact", chain.network),
        (2, "upto", chain.network),
        (1, "exact", "base-sepolia"),
    ]
    assert [row["state"] for row in await claim_rows(sqlite_url)] == ["succeeded"]


async def test_the_sdk_facilitator_client_drives_the_service_in_v2_and_v1(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    sdk = signer_client(x402ClientSync(), new_payer())
    requirements = sdk_requirements(chain)
    payload = sdk.create_payment_payload(
        PaymentRequired(resource=ResourceInfo(url="https://merchant.example/a2a"), accepts=[requirements])
    )
    requirements_v1 = PaymentRequirementsV1(
        scheme="exact",
        network="base-sepolia",
        max_amount_required=str(AMOUNT),
        resource="https://merchant.example/a2a",
        description="a paid skill",
        mime_type="application/json",
        pay_to=PAY_TO,
        max_timeout_seconds=120,
        asset=chain.asset,
        extra={"name": chain.asset_name, "version": chain.asset_version},
    )
    payload_v1 = sdk.create_payment_payload(PaymentRequiredV1(accepts=[requirements_v1]))
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)

    async with HTTPFacilitatorClient(FacilitatorConfig(url=base_url)) as facilitator:
        verified = await facilitator.verify(payload, requirements)
        settled = await facilitator.settle(payload, requirements)
        duplicate = await facilitator.settle(payload, requirements)
        verified_v1 = await facilitator.verify(payload_v1, requirements_v1)
        settled_v1 = await facilitator.settle(payload_v1, requirements_v1)

    assert verified.is_valid and settled.success
    assert (duplicate.success, duplicate.error_reason, duplicate.transaction) == (
        False,
        "duplicate_settlement",
        "",
    )
    assert verified_v1.is_valid
    assert (settled_v1.success, settled_v1.network) == (True, "base-sepolia")
    assert relayer_nonce(chain) == nonce_before + 2
    assert chain.balance_of(PAY_TO) == payee_before + 2 * AMOUNT


class _CounterfactualSigner:
    """The SDK's `ClientEvmSigner` for a wallet not deployed yet: its owner signs, and the signature is
    ERC-6492-wrapped with the factory call that deploys the wallet (the SDK has no such signer itself)."""

    def __init__(self, chain: DevChain) -> None:
        owner = Account.create()
        salt = os.urandom(32)
        self._owner = EthAccountSigner(owner)
        self._wallet = chain.counterfactual_wallet(owner.address, salt)
        self._factory = chain.wallet_factory
        self._calldata = encode_call("createWallet(address,bytes32)", [owner.address, salt])

    @property
    def address(self) -> str:
        return self._wallet

    def sign_typed_data(
        self,
        domain: TypedDataDomain,
        types: dict[str, list[TypedDataField]],
        primary_type: str,
        message: dict[str, Any],
    ) -> bytes:
        inner = self._owner.sign_typed_data(domain, types, primary_type, message)
        return bytes.fromhex(wrap_erc6492(self._factory, self._calldata, "0x" + inner.hex())[2:])


async def test_a_counterfactual_wallet_payment_signed_by_the_sdk_deploys_the_wallet_and_settles(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url, erc6492_factories=chain.wallet_factory)
    signer = _CounterfactualSigner(chain)
    chain.mint(signer.address, AMOUNT)
    client = register_exact_evm_client(x402ClientSync(), signer)
    client.set_spend_controls(False)
    requirements = sdk_requirements(chain)
    payload = client.create_payment_payload(
        PaymentRequired(resource=ResourceInfo(url="https://merchant.example/a2a"), accepts=[requirements])
    )
    assert payload.payload["signature"].endswith("6492" * 16)

    async with HTTPFacilitatorClient(FacilitatorConfig(url=base_url)) as facilitator:
        verified = await facilitator.verify(payload, requirements)
        settled = await facilitator.settle(payload, requirements)

    assert (verified.is_valid, verified.payer) == (True, signer.address)
    assert (settled.success, settled.payer) == (True, signer.address)
    assert chain.rpc.call("eth_getCode", [signer.address, "latest"]) != "0x"
    assert chain.balance_of(signer.address) == 0
