"""Interop of the HTTP service with the official x402 Python SDK (a test dependency): payloads the SDK's
client signs verify and settle on chain, our answers parse with the SDK's models, and the SDK's facilitator
client drives the service, in x402 v2 and v1; the SDK's resource server, built on what our `/supported`
says, takes the SDK client's Permit2 payments (`exact` by Permit2 and `upto`, with an approval or an
EIP-2612 permit) and settles them through us; an `upto` one whose work used nothing settles with no
transaction, and one the server settles above its maximum is refused; a payer without a Permit2
allowance is told to approve Permit2, and the approval transaction the SDK's client signs when offered
the ERC-20 approval extension (which ours does not offer) is never sent."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from eth_account import Account
from x402 import x402ClientSync, x402ResourceServerSync
from x402.extensions.eip2612_gas_sponsoring import declare_eip2612_gas_sponsoring_extension
from x402.extensions.erc20_approval_gas_sponsoring import (
    ERC20_APPROVAL_GAS_SPONSORING_KEY,
    declare_erc20_approval_gas_sponsoring_extension,
)
from x402.http import FacilitatorConfig, HTTPFacilitatorClient, HTTPFacilitatorClientSync
from x402.mechanisms.evm import EthAccountSigner, EthAccountSignerWithRPC
from x402.mechanisms.evm.exact import (
    ExactEvmClientScheme,
    register_exact_evm_client,
    register_exact_evm_server,
)
from x402.mechanisms.evm.types import TypedDataDomain, TypedDataField
from x402.mechanisms.evm.upto import UptoEvmClientScheme, UptoEvmServerScheme
from x402.schemas import (
    PaymentPayload,
    PaymentRequired,
    PaymentRequirements,
    ResourceConfig,
    ResourceInfo,
    SettleResponse,
    SupportedResponse,
    VerifyResponse,
)
from x402.schemas.v1 import PaymentRequiredV1, PaymentRequirementsV1

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from a2a_x402.facilitator.wire import Reason
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO

from .conftest import StartService
from .payments import claim_rows, relayer_address, relayer_nonce, wrap_erc6492
from .permit2_chain import AMOUNT as PERMIT2_AMOUNT
from .permit2_flows import (
    CASES,
    OVER_THE_MAXIMUM,
    UNUSED,
    Before,
    Case,
    check_nothing_moved,
    check_settled_once,
    offer_of,
    payer_for,
)
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

    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
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


@dataclass(frozen=True)
class _Flow:
    """What the SDK's resource server offered, what its client paid, and the answers it got from us."""

    offered: PaymentRequirements
    payment: PaymentPayload
    verified: VerifyResponse
    settled: SettleResponse
    replayed: SettleResponse


def _sdk_flow(
    base_url: str,
    rpc_url: str,
    key: str,
    offer: dict[str, Any],
    case: Case,
    declared: dict[str, Any] | None = None,
) -> _Flow:
    """The SDK's own resource server, client and facilitator client (its sync ones: the test runs this in
    a thread) from the 402 to the settlement; an `upto` server settles what the work used. The 402
    declares `declared`, by default the EIP-2612 extension where the case pays with it."""
    facilitator = HTTPFacilitatorClientSync(FacilitatorConfig(url=base_url))
    server = x402ResourceServerSync(facilitator)
    register_exact_evm_server(server, networks=offer["network"])
    # The SDK's upto server scheme has no type hints and no register function of its own.
    server.register(offer["network"], UptoEvmServerScheme())  # type: ignore[no-untyped-call, arg-type]
    server.initialize()
    price = {"amount": offer["amount"], "asset": offer["asset"], "extra": offer["extra"]}
    config = ResourceConfig(
        scheme=case.scheme,
        pay_to=offer["payTo"],
        price=price,
        network=offer["network"],
        max_timeout_seconds=120,
    )
    if declared is None and case.sponsored:
        declared = declare_eip2612_gas_sponsoring_extension()
    required = server.create_payment_required_response(
        server.build_payment_requirements(config),
        ResourceInfo(url="https://merchant.example/a2a"),
        extensions=declared,
    )
    signer = EthAccountSignerWithRPC(Account.from_key(key), rpc_url)
    client = x402ClientSync()
    client.register(offer["network"], ExactEvmClientScheme(signer))
    client.register(offer["network"], UptoEvmClientScheme(signer))
    # The SDK's spend controls only know the real USDC deployments, not the dev chain's tokens.
    client.set_spend_controls(False)
    payment = client.create_payment_payload(required)
    assert isinstance(payment, PaymentPayload)
    offered = server.find_matching_requirements(required.accepts, payment)
    assert offered is not None
    verified = server.verify_payment(payment, offered)
    charged = offered if case.used is None else offered.model_copy(update={"amount": str(case.used)})
    settled = server.settle_payment(payment, charged)
    replayed = facilitator.settle(payment, charged)
    return _Flow(offered, payment, verified.verify, settled, replayed)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_the_sdk_resource_server_and_client_pay_and_settle_permit2_payments_through_us(
    case: Case, chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    key = payer_for(chain, case)
    payer = Account.from_key(key).address
    offer = offer_of(chain, case)
    before = Before.read(chain, case, payer)

    flow = await asyncio.to_thread(_sdk_flow, base_url, chain.rpc_url, key, offer, case)

    upto_extra = {"facilitatorAddress": relayer_address(chain)} if case.scheme == "upto" else {}
    assert (flow.offered.scheme, flow.offered.amount, flow.offered.extra) == (
        case.scheme,
        str(PERMIT2_AMOUNT),
        offer["extra"] | upto_extra,
    )
    permit = (flow.payment.extensions or {}).get("eip2612GasSponsoring", {}).get("info", {})
    if case.sponsored:
        assert (permit["from"], permit["spender"], permit["amount"]) == (
            payer,
            PERMIT2_ADDRESS,
            str(PERMIT2_AMOUNT),
        )
    else:
        assert "signature" not in permit
    assert (flow.verified.is_valid, flow.verified.payer) == (True, payer)
    assert (flow.settled.success, flow.settled.payer, flow.settled.amount) == (True, payer, str(case.settled))
    assert (flow.replayed.success, flow.replayed.error_reason) == (False, Reason.DUPLICATE_SETTLEMENT.value)
    check_settled_once(chain, case, payer, before, flow.settled.transaction)
    assert [row["state"] for row in await claim_rows(sqlite_url)] == ["succeeded"]


async def test_the_sdk_resource_server_settles_an_upto_payment_that_used_nothing_with_no_transaction(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    key = payer_for(chain, UNUSED)
    payer = Account.from_key(key).address
    before = Before.read(chain, UNUSED, payer)

    flow = await asyncio.to_thread(_sdk_flow, base_url, chain.rpc_url, key, offer_of(chain, UNUSED), UNUSED)

    assert flow.verified.is_valid
    assert (flow.settled.success, flow.settled.transaction, flow.settled.amount) == (True, "", "0")
    assert (flow.replayed.success, flow.replayed.error_reason) == (False, Reason.DUPLICATE_SETTLEMENT.value)
    check_nothing_moved(
        chain, UNUSED, payer, before, int(flow.payment.payload["permit2Authorization"]["nonce"])
    )
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], int(row["amount"]), row["tx_hash"]) == ("succeeded", 0, None)


async def test_the_sdk_resource_server_settling_upto_above_the_maximum_is_refused_with_its_reason(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    case = OVER_THE_MAXIMUM
    key = payer_for(chain, case)
    payer = Account.from_key(key).address
    before = Before.read(chain, case, payer)

    flow = await asyncio.to_thread(_sdk_flow, base_url, chain.rpc_url, key, offer_of(chain, case), case)

    exceeds = Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT.value
    assert flow.verified.is_valid
    assert (flow.settled.success, flow.settled.error_reason, flow.settled.transaction) == (False, exceeds, "")
    assert (flow.replayed.success, flow.replayed.error_reason) == (False, exceeds)
    check_nothing_moved(
        chain, case, payer, before, int(flow.payment.payload["permit2Authorization"]["nonce"])
    )
    assert await claim_rows(sqlite_url) == []


@pytest.mark.parametrize("scheme", ["exact", "upto"])
@pytest.mark.parametrize("offered", [False, True], ids=["nothing declared", "ERC-20 approval declared"])
async def test_a_payer_without_a_permit2_allowance_is_told_to_approve_and_nothing_is_sent(
    scheme: str, offered: bool, chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    case = Case(scheme, "plain_asset")
    key = payer_for(chain, case, approved=False)
    payer = Account.from_key(key).address
    before = Before.read(chain, case, payer)
    declared = declare_erc20_approval_gas_sponsoring_extension() if offered else None

    flow = await asyncio.to_thread(
        _sdk_flow, base_url, chain.rpc_url, key, offer_of(chain, case), case, declared
    )

    approval = (flow.payment.extensions or {}).get(ERC20_APPROVAL_GAS_SPONSORING_KEY, {})
    assert ("signedTransaction" in approval.get("info", {})) == offered
    required = Reason.PERMIT2_ALLOWANCE_REQUIRED.value
    assert (flow.verified.is_valid, flow.verified.invalid_reason, flow.verified.payer) == (
        False,
        required,
        payer,
    )
    assert "approve Permit2" in (flow.verified.invalid_message or "")
    assert [(a.success, a.error_reason, a.transaction) for a in (flow.settled, flow.replayed)] == [
        (False, required, "")
    ] * 2
    nonce = int(flow.payment.payload["permit2Authorization"]["nonce"])
    check_nothing_moved(chain, case, payer, before, nonce)
    assert int(chain.rpc.call("eth_getTransactionCount", [payer, "latest"]), 16) == 0
    assert await claim_rows(sqlite_url) == []
