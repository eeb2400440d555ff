"""The official JavaScript A2A SDK (`@a2a-js/sdk` 1.3.0) pays the reference merchant with what the x402
TypeScript SDK's client signs (`@x402/core` 2.27 with `@x402/evm`'s exact and upto EVM client schemes):
`exact` by Permit2 at a merchant asking for the dev chain's plain ERC-20 (no EIP-3009), and `upto` at a
merchant whose tenants meter text-stats, settled for what the work reported it used, below the maximum.

`js/pay.mjs` with `signer: "x402"` is the client: the A2A SDK's card resolver, `ClientFactory` and transport
on one binding and tenant, the x402 SDK's client signing the terms the task asked for. Each run ends with
the task completed, its receipt (and, for `upto`, its usage) on the client's side, the signature kept
nowhere in the task, the same payment presented for another task refused, and the payee credited exactly
once, on chain and in the ledger, by exactly the settled amount of the merchant's token. gRPC is not run:
`@a2a-js/sdk`'s gRPC client needs `@grpc/grpc-js` and `@bufbuild/protobuf`, which `package.json` does not
pin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.merchant.payments._handler import USED_ELSEWHERE
from tests.devchain.permit2_sdk import permit2_payer
from tests.facilitator.permit2_chain import funded_payer
from tests.fixtures.chain import idle_for
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    MerchantStarter,
    RunningMerchant,
    write_tenants_file,
)
from tests.fixtures.node import NodeScript
from tests.merchant.payments.test_metered_settlement import MAXIMUM, MeteredExecutor

from .conftest import IDLE_S, NAMED_TENANT, TEXT, Shop
from .test_a2a_js import BINDINGS, PAY

PAYEES = {"": (DEFAULT_PAY_TO, DEFAULT_PRICE), NAMED_TENANT: TWO_TENANTS[NAMED_TENANT]}
"""Both shops' tenants: the default one and `acme`, each with its own payee."""

USED = 1234 * 25
"""What the metered work reports it used (1234 tokens at 25 atomic units), well below `MAXIMUM`."""


def _opened(merchant: RunningMerchant, chain: DevChain, asset: str) -> Shop:
    """`merchant` as a shop of `PAYEES` asking for `asset`, on a chain idle for `IDLE_S` when the client
    pays."""
    opening = {tenant: chain.balance_of(pay_to, asset=asset) for tenant, (pay_to, _) in PAYEES.items()}
    idle_for(chain.rpc, IDLE_S)
    return Shop(merchant, chain, PAYEES, opening, asset)


@pytest.fixture
def permit2_shop(start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path) -> Shop:
    """The reference merchant asking for the plain ERC-20: its terms are `exact` by Permit2."""
    tenants_file = write_tenants_file(tmp_path / "tenants.toml", PAYEES)
    merchant = start_merchant(sqlite_url, tenants_file=tenants_file, asset=chain.plain_asset)
    return _opened(merchant, chain, chain.plain_asset)


@pytest.fixture
def metered_shop(start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path) -> Shop:
    """The reference merchant whose tenants both meter text-stats up to `MAXIMUM` (their terms are `upto`),
    the work reporting `USED` on its usage meter."""
    tenants_file = tmp_path / "tenants.toml"
    lines: list[str] = []
    for tenant, (pay_to, price) in PAYEES.items():
        table = "default" if tenant == "" else f"tenants.{tenant}"
        lines += [f"[{table}]", f'pay_to = "{pay_to}"', f"price = {price}", f"[{table}.metered_skills]"]
        lines += [f"text-stats = {MAXIMUM}", ""]
    tenants_file.write_text("\n".join(lines))
    delegate = MeteredExecutor([("tokens", 1234, 25)])
    merchant = start_merchant(sqlite_url, tenants_file=tenants_file, delegate=delegate)
    return _opened(merchant, chain, chain.asset)


async def _pay(
    shop: Shop, node_script: NodeScript, key: str, binding: str, streaming: bool, tenant: str
) -> dict[str, Any]:
    """Pay `shop`'s text-stats at `tenant` with `pay.mjs`, the x402 SDK signing, then replay the payment
    for another task; what the client saw, its task completed, the payment signed by the SDK for the terms
    offered, and the replay refused."""
    request = {
        "baseUrl": shop.base_url,
        "binding": BINDINGS[binding],
        "streaming": streaming,
        "tenant": tenant,
        "key": key,
        "extension": EXTENSION_URI,
        "text": TEXT,
        "signer": "x402",
        "rpcUrl": shop.chain.rpc_url,
        "replay": True,
    }
    seen: dict[str, Any] = await node_script.run(PAY, request)
    # A settlement slower than the merchant's budget is answered working, the payment verified (spec §7,
    # T9): the script then follows the task, and paidState is how the paid turn ended.
    assert seen["pendingStatus"] in (None, "payment-verified"), seen
    assert (seen["askedState"], seen["paidState"], seen["fetchedState"]) == (
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_COMPLETED",
        "TASK_STATE_COMPLETED",
    ), seen
    if streaming and seen["pendingStatus"] is None:
        assert "artifactUpdate" in seen["paidKinds"], seen["paidKinds"]
    assert (seen["paidArtifacts"], seen["fetchedArtifacts"]) == (1, 1)
    # The payment is kept in the task's history without its signature.
    assert seen["signatureSeen"] is False
    [option] = seen["required"]["required"]["accepts"]
    signed = seen["signed"]
    assert signed["accepted"] == option
    assert signed["payload"]["permit2Authorization"]["from"] == Account.from_key(key).address
    assert option["payTo"] == shop.pay_to(tenant)
    # Presented again for another task (its `accepted` swapped: it is not signed): refused, that task
    # still waits for a payment, and nothing more is settled (the caller's `assert_paid_once`).
    replayed = seen["replayed"]
    assert replayed["ok"] is False and USED_ELSEWHERE in replayed["message"], replayed
    assert seen["replayedState"] == "TASK_STATE_INPUT_REQUIRED"
    return seen


@pytest.mark.parametrize(
    ("binding", "streaming", "tenant"),
    [
        pytest.param("jsonrpc", False, "", id="jsonrpc-blocking-default-tenant"),
        pytest.param("http+json", True, NAMED_TENANT, id=f"http+json-streaming-{NAMED_TENANT}"),
    ],
)
async def test_the_js_sdks_pay_exact_by_permit2_and_the_payee_is_credited_once(
    permit2_shop: Shop, node_script: NodeScript, binding: str, streaming: bool, tenant: str
) -> None:
    chain = permit2_shop.chain
    key = funded_payer(chain, chain.plain_asset)

    seen = await _pay(permit2_shop, node_script, key, binding, streaming, tenant)

    [option] = seen["required"]["required"]["accepts"]
    assert (option["scheme"], option["asset"], option["amount"]) == (
        "exact",
        chain.plain_asset,
        str(permit2_shop.price(tenant)),
    )
    assert option["extra"]["assetTransferMethod"] == "permit2"
    completed = seen["completed"]
    assert completed["status"] == "payment-completed"
    [receipt] = completed["receipts"]
    assert (receipt["success"], receipt["network"]) == (True, chain.network)
    assert seen["fetchedExtension"]["receipts"] == [receipt]
    await permit2_shop.assert_paid_once(
        tenant=tenant, task_id=seen["taskId"], payer_key=key, transaction=receipt["transaction"]
    )


@pytest.mark.parametrize(
    ("binding", "streaming", "tenant"),
    [
        pytest.param("jsonrpc", True, NAMED_TENANT, id=f"jsonrpc-streaming-{NAMED_TENANT}"),
        pytest.param("http+json", False, "", id="http+json-blocking-default-tenant"),
    ],
)
async def test_the_js_sdks_pay_upto_and_the_payee_is_credited_what_was_used(
    metered_shop: Shop, node_script: NodeScript, binding: str, streaming: bool, tenant: str
) -> None:
    chain = metered_shop.chain
    key = permit2_payer(chain, chain.asset, 10**9)

    seen = await _pay(metered_shop, node_script, key, binding, streaming, tenant)

    [option] = seen["required"]["required"]["accepts"]
    assert (option["scheme"], option["asset"], option["amount"]) == ("upto", chain.asset, str(MAXIMUM))
    assert option["extra"]["facilitatorAddress"] == Account.from_key(chain.relayer_key).address
    completed = seen["completed"]
    assert completed["status"] == "payment-completed"
    assert (completed["usage"]["maximum"], completed["usage"]["settled"]) == (str(MAXIMUM), str(USED))
    [receipt] = completed["receipts"]
    assert (receipt["success"], receipt["network"], receipt["amount"]) == (True, chain.network, str(USED))
    assert chain.balance_of(Account.from_key(key).address) == 10**9 - USED
    await metered_shop.assert_paid_once(
        tenant=tenant, task_id=seen["taskId"], payer_key=key, transaction=receipt["transaction"], amount=USED
    )
