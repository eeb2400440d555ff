"""The official JavaScript SDK (`@a2a-js/sdk` 1.3.0, A2A 1.0) pays the reference merchant (extension v0.3).

`js/pay.mjs` is the client: the SDK's card resolver, `ClientFactory` and transport on one binding and
tenant, and viem signing the EIP-3009 authorization from the terms alone (its EIP-712 domain name and
version from `extra`, the chain id from the CAIP-2 network). Each run ends with the task completed, its
artifact and receipt on the client's side, and the payee credited exactly once on chain and in the ledger.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_x402 import EXTENSION_URI
from tests.fixtures.node import NodeScript

from .conftest import NAMED_TENANT, TEXT, Shop

PAY = Path(__file__).parent / "js" / "pay.mjs"
CHOOSE = Path(__file__).parent / "js" / "choose.mjs"

BINDINGS = {"jsonrpc": "JSONRPC", "http+json": "HTTP+JSON"}
"""The SDK's protocol names of the bindings the merchant serves, by test id."""


@pytest.mark.parametrize(
    ("binding", "streaming", "tenant"),
    [
        pytest.param("jsonrpc", False, "", id="jsonrpc-blocking-default-tenant"),
        pytest.param("jsonrpc", True, NAMED_TENANT, id=f"jsonrpc-streaming-{NAMED_TENANT}"),
        pytest.param("http+json", False, NAMED_TENANT, id=f"http+json-blocking-{NAMED_TENANT}"),
        pytest.param("http+json", True, "", id="http+json-streaming-default-tenant"),
    ],
)
async def test_the_js_sdk_pays_and_the_payee_is_credited_once(
    shop: Shop, node_script: NodeScript, binding: str, streaming: bool, tenant: str
) -> None:
    key = shop.new_payer()
    request = {
        "baseUrl": shop.base_url,
        "binding": BINDINGS[binding],
        "streaming": streaming,
        "tenant": tenant,
        "key": key,
        "extension": EXTENSION_URI,
        "text": TEXT,
    }

    seen = await node_script.run(PAY, request)

    assert seen["protocolVersion"] == "1.0"
    assert (seen["askedState"], seen["required"]["status"]) == (
        "TASK_STATE_INPUT_REQUIRED",
        "payment-required",
    )
    [option] = seen["required"]["required"]["accepts"]
    assert (option["payTo"], option["amount"]) == (shop.pay_to(tenant), str(shop.price(tenant)))
    assert seen["paidState"] == "TASK_STATE_COMPLETED"
    if streaming:
        assert "artifactUpdate" in seen["paidKinds"], seen["paidKinds"]
    assert seen["paidArtifacts"] == 1
    completed = seen["completed"]
    assert completed["status"] == "payment-completed"
    [receipt] = completed["receipts"]
    assert (receipt["success"], receipt["network"]) == (True, shop.chain.network)
    assert (seen["fetchedState"], seen["fetchedArtifacts"]) == ("TASK_STATE_COMPLETED", 1)
    assert seen["fetchedExtension"]["receipts"] == [receipt]
    await shop.assert_paid_once(
        tenant=tenant, task_id=seen["taskId"], payer_key=key, transaction=receipt["transaction"]
    )


@pytest.mark.parametrize("binding", BINDINGS)
async def test_deviation_the_js_factory_takes_the_last_tenants_interface_of_the_card(
    shop: Shop, node_script: NodeScript, binding: str
) -> None:
    # On a card listing the default tenant's interfaces and then `acme`'s, the SDK's ClientFactory keeps
    # the last 1.0 interface of each binding (a2a-sdk 1.3's Python factory the first): a JS client that
    # does not narrow the card to its tenant talks to, and pays, the named tenant. pay.mjs narrows it.
    request = {"baseUrl": shop.base_url, "binding": BINDINGS[binding]}

    chosen = await node_script.run(CHOOSE, request)

    assert chosen == {"protocolVersion": "1.0", "tenant": NAMED_TENANT}
