"""The merchant's Permit2 terms declare the x402 `eip2612GasSponsoring` extension as the x402 SDK servers do
(`_sponsoring`): for a token with EIP-2612 whose facilitator lists the extension, and for no other (a plain
ERC-20, DevUSDC with a domain separator but no `nonces`, EIP-3009 terms, a facilitator without it); what
could not be asked is asked again. The x402 Python SDK's client, given the terms, signs the EIP-2612 permit
of Permit2 on its own, and the merchant is paid with it: the payer sends no transaction."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from x402 import x402ClientSync
from x402.mechanisms.evm import EthAccountSignerWithRPC
from x402.mechanisms.evm.exact.client import ExactEvmScheme
from x402.schemas import PaymentRequired as SdkPaymentRequired

from a2a_x402.devchain import PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain
from a2a_x402.facilitator import Facilitator, HttpFacilitatorClient, RpcClient
from a2a_x402.facilitator.wire import PaymentRequired, SupportedResponse
from a2a_x402.merchant.payments import GasSponsoring
from tests.facilitator.permit2_chain import funded_payer
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import facilitator_settings_on
from tests.fixtures.merchant import (
    DEFAULT_PRICE,
    MerchantStarter,
    MerchantWire,
    offered_terms,
    payment_message,
)

from .flows import offer

KEY = "eip2612GasSponsoring"


@pytest.fixture
async def facilitator(chain: DevChain, sqlite_url: str) -> Any:
    service = await Facilitator.open(facilitator_settings_on(chain, sqlite_url))
    try:
        yield service
    finally:
        await service.aclose()


@pytest.fixture
async def rpc(chain: DevChain) -> Any:
    client = RpcClient(chain.rpc_url, timeout_s=HANG_S)
    try:
        yield client
    finally:
        await client.aclose()


async def test_declared_for_an_eip2612_token_whose_facilitator_lists_the_extension(
    chain: DevChain, facilitator: Facilitator, rpc: RpcClient
) -> None:
    async def supported() -> SupportedResponse:
        return facilitator.supported()

    async def without_it() -> SupportedResponse:  # another facilitator, which relays no permit
        answer = facilitator.supported()
        return answer.model_copy(update={"extensions": tuple(e for e in answer.extensions if e != KEY)})

    sponsoring = GasSponsoring(supported, rpc)
    declared = await sponsoring.extensions(chain.permit_asset)

    assert declared is not None and set(declared) == {KEY}
    assert declared[KEY]["info"]["version"] == "1"
    assert set(declared[KEY]["schema"]["required"]) == {
        "from", "asset", "spender", "amount", "nonce", "deadline", "signature", "version"
    }  # fmt: skip
    assert await sponsoring.extensions(chain.plain_asset) is None  # no EIP-2612 at all
    assert await sponsoring.extensions(chain.asset) is None  # a domain separator, but no nonces()
    assert await GasSponsoring(without_it, rpc).extensions(chain.permit_asset) is None
    assert await GasSponsoring(None, rpc).extensions(chain.permit_asset) is None
    # The declaration fits the terms' `extensions` as the wire reads them.
    document = {"x402Version": 2, "resource": {"url": "https://m.test/"}, "accepts": [_any_terms()]}
    PaymentRequired.model_validate({**document, "extensions": declared})


async def test_what_could_not_be_asked_is_asked_again(
    chain: DevChain, facilitator: Facilitator, rpc: RpcClient
) -> None:
    down = HttpFacilitatorClient("http://127.0.0.1:9")  # nothing listens there
    asked: list[str] = []

    async def flaky() -> SupportedResponse:
        asked.append("supported")
        return facilitator.supported() if len(asked) > 1 else await down.supported()

    sponsoring = GasSponsoring(flaky, rpc)
    try:
        first = await sponsoring.extensions(chain.permit_asset)
        second = await sponsoring.extensions(chain.permit_asset)
        third = await sponsoring.extensions(chain.permit_asset)
    finally:
        await down.aclose()

    assert (first, second is not None, third == second) == (None, True, True)
    assert asked == ["supported", "supported"]  # kept once answered


async def test_the_merchants_terms_declare_it_only_for_its_eip2612_token(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain
) -> None:
    permit = start_merchant(
        sqlite_url, asset=chain.permit_asset, asset_name=PERMIT_ASSET_NAME, asset_version=PERMIT_ASSET_VERSION
    )
    plain = start_merchant(sqlite_url, asset=chain.plain_asset)
    eip3009 = start_merchant(sqlite_url)
    offered = {}
    for name, merchant in (("permit", permit), ("plain", plain), ("eip3009", eip3009)):
        async with merchant.http() as client:
            offered[name] = offered_terms(await offer(MerchantWire(client, "jsonrpc")))

    assert set(offered["permit"].extensions or {}) == {KEY}
    assert (offered["plain"].extensions, offered["eip3009"].extensions) == (None, None)
    [terms] = offered["permit"].accepts
    assert terms.extra is not None
    assert (terms.extra["name"], terms.extra["version"]) == (PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION)


async def test_the_sdk_client_signs_the_declared_permit_and_pays_without_any_transaction(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain
) -> None:
    merchant = start_merchant(
        sqlite_url, asset=chain.permit_asset, asset_name=PERMIT_ASSET_NAME, asset_version=PERMIT_ASSET_VERSION
    )
    key = funded_payer(chain, chain.permit_asset, approved=False)
    payer = Account.from_key(key).address
    client = x402ClientSync()
    client.register(
        chain.network, ExactEvmScheme(EthAccountSignerWithRPC(Account.from_key(key), chain.rpc_url))
    )
    client.set_spend_controls(False)  # they know only the real USDC deployments
    before = chain.balance_of(payer, asset=chain.permit_asset)
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        required = SdkPaymentRequired.model_validate(offered_terms(task).to_json_dict())
        payment: dict[str, Any] = client.create_payment_payload(required).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        done = (await wire.send(payment_message(task["id"], payment)))["task"]

    info = payment["extensions"][KEY]["info"]
    assert (info["from"], info["asset"], info["amount"]) == (payer, chain.permit_asset, str(DEFAULT_PRICE))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    assert chain.balance_of(payer, asset=chain.permit_asset) == before - DEFAULT_PRICE
    assert int(chain.rpc.call("eth_getTransactionCount", [payer, "latest"]), 16) == 0


def _any_terms() -> dict[str, Any]:
    return {
        "scheme": "exact",
        "network": "eip155:31337",
        "asset": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        "amount": "1",
        "payTo": "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
        "maxTimeoutSeconds": 60,
        "extra": {"assetTransferMethod": "permit2"},
    }
