"""The official JavaScript SDK (`@a2a-js/sdk` 1.3.0, A2A 1.0) pays the reference merchant (extension v0.3).

`js/pay.mjs` is the client: the SDK's card resolver, `ClientFactory` and transport on one binding and
tenant, and viem signing the EIP-3009 authorization from the terms alone (its EIP-712 domain name and
version from `extra`, the chain id from the CAIP-2 network). Each run ends with the task completed, its
artifact and receipt on the client's side, and the payee credited exactly once on chain and in the ledger.
Against a merchant serving only callers with credentials, the client presents an API key or a bearer JWT
(JSON-RPC and HTTP+JSON); another caller's credential finds no task (TaskNotFound), and a client without
credentials is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.merchant.callers import CallerKeys
from a2a_x402.storage import create_engine
from tests.fixtures.chain import idle_for
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.jwt_issuer import AUDIENCE, Issuer
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    MerchantStarter,
    write_tenants_file,
)
from tests.fixtures.node import NodeScript

from .conftest import IDLE_S, NAMED_TENANT, TEXT, Shop

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
    # A settlement slower than the merchant's budget is answered working, the payment verified (spec §7,
    # T9): the script then follows the task, and paidState is how the paid turn ended.
    assert seen["pendingStatus"] in (None, "payment-verified"), seen
    assert seen["paidState"] == "TASK_STATE_COMPLETED"
    if streaming and seen["pendingStatus"] is None:
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


def closed_tenants_file(path: Path, issuer: Issuer | None = None) -> Path:
    """The default tenant and `acme`, serving only callers with credentials; `acme` trusts `issuer`."""
    payees = {"": (DEFAULT_PAY_TO, DEFAULT_PRICE), NAMED_TENANT: TWO_TENANTS[NAMED_TENANT]}
    tenants_file = write_tenants_file(path, payees)
    closed = re.sub(r"(?m)^(price = .*)$", r"\1\nanonymous_callers = false", tenants_file.read_text())
    if issuer is not None:
        closed += (
            f"\n[[tenants.{NAMED_TENANT}.jwt_issuers]]\nissuer = {issuer.url!r}\naudience = {AUDIENCE!r}\n"
            f"jwks_url = {issuer.jwks_url!r}\n"
        )
    tenants_file.write_text(closed)
    return tenants_file


@pytest.fixture
def closed_shop(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path, jwt_issuer: Issuer
) -> Shop:
    """`shop`, but every tenant serves only callers with credentials (`anonymous_callers = false`), and
    `acme` trusts the bearer JWTs of `jwt_issuer` (its own issuer, in the tenants file)."""
    payees = {"": (DEFAULT_PAY_TO, DEFAULT_PRICE), NAMED_TENANT: TWO_TENANTS[NAMED_TENANT]}
    tenants_file = closed_tenants_file(tmp_path / "tenants.toml", jwt_issuer)
    merchant = start_merchant(sqlite_url, tenants_file=tenants_file)
    opening = {tenant: chain.balance_of(pay_to) for tenant, (pay_to, _) in payees.items()}
    idle_for(chain.rpc, IDLE_S)
    return Shop(merchant, chain, payees, opening)


async def api_key(database_url: str, tenant: str, name: str) -> str:
    """A new API key named `name` at `tenant` of the merchant on `database_url`."""
    engine = create_engine(database_url)
    try:
        return await CallerKeys(engine).create(tenant, name)
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    ("binding", "streaming", "tenant"),
    [
        pytest.param("jsonrpc", False, "", id="jsonrpc-blocking-default-tenant"),
        pytest.param("http+json", True, NAMED_TENANT, id=f"http+json-streaming-{NAMED_TENANT}"),
    ],
)
async def test_the_js_sdk_pays_with_an_api_key_and_a_stranger_finds_no_task(
    closed_shop: Shop, node_script: NodeScript, binding: str, streaming: bool, tenant: str
) -> None:
    database_url = closed_shop.merchant.database_url
    key = closed_shop.new_payer()
    request = {
        "baseUrl": closed_shop.base_url,
        "binding": BINDINGS[binding],
        "streaming": streaming,
        "tenant": tenant,
        "key": key,
        "extension": EXTENSION_URI,
        "text": TEXT,
        "token": await api_key(database_url, tenant, "js-buyer"),
        "strangerToken": await api_key(database_url, tenant, "js-stranger"),
    }

    seen = await node_script.run(PAY, request)

    # A settlement slower than the merchant's budget is answered working, the payment verified (spec §7,
    # T9): the script then follows the task, and paidState is how the paid turn ended.
    assert seen["pendingStatus"] in (None, "payment-verified"), seen
    assert (seen["paidState"], seen["fetchedState"]) == ("TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED")
    assert seen["signatureSeen"] is False
    for call in ("strangerGet", "strangerCancel"):
        # The SDK names the error after its binding (JsonRpcTaskNotFoundError on JSON-RPC).
        assert seen[call]["ok"] is False and seen[call]["name"].endswith("TaskNotFoundError"), seen[call]
    for call in ("anonymousGet", "anonymousSend"):
        # This tenant serves no caller without credentials: InvalidRequest, whatever the task.
        assert seen[call]["ok"] is False and "credentials" in seen[call]["message"], seen[call]
    assert seen["afterState"] == "TASK_STATE_COMPLETED"
    [receipt] = seen["completed"]["receipts"]
    await closed_shop.assert_paid_once(
        tenant=tenant, task_id=seen["taskId"], payer_key=key, transaction=receipt["transaction"]
    )


@pytest.mark.parametrize(
    ("binding", "streaming"),
    [
        pytest.param("jsonrpc", False, id="jsonrpc-blocking"),
        pytest.param("http+json", True, id="http+json-streaming"),
    ],
)
async def test_the_js_sdk_pays_with_a_jwt_of_the_tenants_own_issuer_valid_there_only(
    closed_shop: Shop, node_script: NodeScript, jwt_issuer: Issuer, binding: str, streaming: bool
) -> None:
    key = closed_shop.new_payer()
    request = {
        "baseUrl": closed_shop.base_url,
        "binding": BINDINGS[binding],
        "streaming": streaming,
        "tenant": NAMED_TENANT,
        "key": key,
        "extension": EXTENSION_URI,
        "text": TEXT,
        "token": jwt_issuer.token("svc-buyer"),
        "strangerToken": jwt_issuer.token("svc-stranger"),
    }

    seen = await node_script.run(PAY, request)

    # A settlement slower than the merchant's budget is answered working, the payment verified (spec §7,
    # T9): the script then follows the task, and paidState is how the paid turn ended.
    assert seen["pendingStatus"] in (None, "payment-verified"), seen
    assert (seen["paidState"], seen["afterState"]) == ("TASK_STATE_COMPLETED", "TASK_STATE_COMPLETED")
    for call in ("strangerGet", "strangerCancel"):
        assert seen[call]["ok"] is False and seen[call]["name"].endswith("TaskNotFoundError"), seen[call]
    [receipt] = seen["completed"]["receipts"]
    await closed_shop.assert_paid_once(
        tenant=NAMED_TENANT, task_id=seen["taskId"], payer_key=key, transaction=receipt["transaction"]
    )
    # acme's issuer opens acme only: at the default tenant the same token is no caller's, and its card
    # (the 0.3 root card speaks for the default tenant alone) declares no bearer JWT.
    async with httpx.AsyncClient(base_url=closed_shop.base_url, timeout=HANG_S) as http:
        envelope = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {request['token']}"}
        answer = (await http.post("/a2a/jsonrpc", json=envelope, headers=headers)).json()
        card_v0_3 = (await http.get("/.well-known/agent-card.json", headers={"A2A-Version": "0.3"})).json()
        acme_card = (await http.get(f"/t/{NAMED_TENANT}/.well-known/agent-card.json")).json()
    assert "not valid at this tenant" in answer["error"]["message"], answer
    assert "bearerJwt" not in card_v0_3["securitySchemes"]
    assert "bearerJwt" in acme_card["securitySchemes"]
