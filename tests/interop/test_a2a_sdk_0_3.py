"""The a2a-sdk 0.3.26 Python client pays the reference merchant on its A2A 0.3 interfaces (extension v0.2).

The client runs in `.venv-compat` (`compat_python`): a2a-sdk 0.3.26's card resolver, `ClientFactory` and
transports, its pydantic types, and its `extensions` setting (`X-A2A-Extensions`). It reads the flat
`x402.payment.*` keys, and the x402 0.2 package (the x402 v1 client the a2a-x402 v0.2 Python package uses)
parses the v1 terms and signs the EIP-3009 authorization. It pays with that x402 v1 payload, or with the
same authorization in an x402 v2 payload (`accepted`: the v2 form of the terms, the network as CAIP-2 from
x402's own chain table). Binding x payload version x blocking/streaming is covered pairwise (each pair of
values once) rather than as the full cross product: every paid run costs suite time. A2A 0.3 has no
tenant field: the root's 0.3 interfaces are the default tenant's, and the client pays the named tenant by
fetching that tenant's own card (`/t/acme/.well-known/agent-card.json`, from the base URL `/t/acme`) and
using the 0.3 interfaces it lists, under the same prefix.
"""

from __future__ import annotations

import pytest

from a2a_x402.extension import EXTENSION_URI_V02
from a2a_x402.merchant.edge import tenant_root
from tests.fixtures.compat import CompatPython

from .conftest import NAMED_TENANT, TEXT, Shop

PAY_0_3 = """
import asyncio, json, sys, time, uuid
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, TaskQueryParams, TextPart
from eth_account import Account
from x402.clients.base import x402Client
from x402.exact import decode_payment
from x402.networks import EVM_NETWORK_TO_CHAIN_ID
from x402.types import x402PaymentRequiredResponse

given = json.load(sys.stdin)

def message(text, **fields):
    parts = [Part(root=TextPart(text=text))]
    return Message(message_id=str(uuid.uuid4()), role=Role.user, parts=parts, **fields)

async def send(client, request):
    # (task, update) pairs; the SDK's task manager keeps the task up to date, so the last pair's task is
    # the task as the client sees it at the end, on a blocking call and on a stream alike.
    events = [event async for event in client.send_message(request)]
    return events, events[-1][0]

async def followed(client, task_id):
    # The task once out of "working": a settlement still pending when the merchant answers leaves the task
    # working, and the client follows it (spec §7, T9), for as long as HANG_S.
    deadline = time.monotonic() + 120
    while (task := await client.get_task(TaskQueryParams(id=task_id))).status.state == "working":
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} still working")
        await asyncio.sleep(0.1)
    return task

def v2_payload(v1, chosen, resource):
    accepted = {
        "scheme": chosen.scheme,
        "network": f"eip155:{EVM_NETWORK_TO_CHAIN_ID[chosen.network]}",
        "asset": chosen.asset,
        "amount": chosen.max_amount_required,
        "payTo": chosen.pay_to,
        "maxTimeoutSeconds": chosen.max_timeout_seconds,
        "extra": chosen.extra,
    }
    return {"x402Version": 2, "accepted": accepted, "resource": resource, "payload": v1["payload"]}

async def main():
    async with httpx.AsyncClient(timeout=120) as http:  # a hang guard, as HANG_S
        card = await A2ACardResolver(http, given["baseUrl"]).get_agent_card()
        config = ClientConfig(
            httpx_client=http,
            supported_transports=[given["transport"]],
            streaming=given["streaming"],
            extensions=[given["extension"]],
        )
        client = ClientFactory(config).create(card)
        _, asked = await send(client, message(given["text"]))
        metadata = asked.status.message.metadata
        required = x402PaymentRequiredResponse.model_validate(metadata["x402.payment.required"])
        payer = x402Client(Account.from_key(given["key"]))
        chosen = payer.select_payment_requirements(required.accepts)
        payload = decode_payment(payer.create_payment_header(chosen, required.x402_version))
        if given["x402Version"] == 2:
            resource = {"url": chosen.resource, "description": chosen.description}
            payload = v2_payload(payload, chosen, {**resource, "mimeType": chosen.mime_type})
        submitted = {"x402.payment.status": "payment-submitted", "x402.payment.payload": payload}
        payment = message("Here is my payment.", task_id=asked.id, metadata=submitted)
        events, answered = await send(client, payment)
        fetched = await followed(client, asked.id)
        await client.close()
    # A settlement slower than the merchant's budget is answered working, the payment verified; the paid turn
    # then ends as the client followed it.
    pending = answered.status.state == "working"
    paid = fetched if pending else answered
    dump = lambda model: model.model_dump(mode="json", by_alias=True, exclude_none=True)
    print(json.dumps({
        "card": dump(card),
        "asked": dump(asked),
        "chosen": dump(chosen),
        "payload": payload,
        "updates": [update.kind for _, update in events if update is not None],
        "pending": answered.status.message.metadata["x402.payment.status"] if pending else None,
        "paid": dump(paid),
        "fetched": dump(fetched),
    }))

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("tenant", "transport", "x402_version", "streaming"),
    [
        pytest.param("", "JSONRPC", 1, False, id="default-jsonrpc-x402v1-blocking"),
        pytest.param("", "JSONRPC", 2, True, id="default-jsonrpc-x402v2-streaming"),
        pytest.param("", "HTTP+JSON", 1, True, id="default-http+json-x402v1-streaming"),
        pytest.param("", "HTTP+JSON", 2, False, id="default-http+json-x402v2-blocking"),
        pytest.param(NAMED_TENANT, "JSONRPC", 1, True, id="named-jsonrpc-x402v1-streaming"),
        pytest.param(NAMED_TENANT, "HTTP+JSON", 2, False, id="named-http+json-x402v2-blocking"),
    ],
)
async def test_the_0_3_sdk_client_pays_and_the_payee_is_credited_once(
    shop: Shop, compat_python: CompatPython, tenant: str, transport: str, x402_version: int, streaming: bool
) -> None:
    key = shop.new_payer()
    root = shop.base_url + (tenant_root(tenant) if tenant else "")
    request = {
        "baseUrl": root,
        "transport": transport,
        "streaming": streaming,
        "extension": EXTENSION_URI_V02,
        "key": key,
        "x402Version": x402_version,
        "text": TEXT,
    }

    seen = await compat_python.run(PAY_0_3, request)

    # The card the client fetched lists only the tenant's interfaces, and the client used one of them.
    card = seen["card"]
    assert [i["url"] for i in card["additionalInterfaces"]] == [root + "/a2a/jsonrpc", root + "/a2a/rest"]
    if tenant:
        # Its x402 declaration names only its own payee, for a client with no tenant of its own to match.
        [declared] = [e for e in card["capabilities"]["extensions"] if e["uri"] == EXTENSION_URI_V02]
        payee = {"network": shop.chain.network, "address": shop.pay_to(tenant)}
        assert declared["params"]["payTo"] == [payee]
    asked = seen["asked"]
    assert asked["status"]["state"] == "input-required"
    assert asked["status"]["message"]["metadata"]["x402.payment.status"] == "payment-required"
    chosen = seen["chosen"]
    assert (chosen["network"], chosen["payTo"]) == ("base-sepolia", shop.pay_to(tenant))
    assert chosen["maxAmountRequired"] == str(shop.price(tenant))
    assert seen["payload"]["x402Version"] == x402_version
    # A settlement slower than the merchant's budget is answered working, the payment verified (spec §7,
    # T9): the script then follows the task, and "paid" is how the paid turn ended.
    assert seen["pending"] in (None, "payment-verified"), seen
    paid = seen["paid"]
    assert (paid["id"], paid["status"]["state"]) == (asked["id"], "completed")
    if streaming and seen["pending"] is None:
        assert "artifact-update" in seen["updates"], seen["updates"]
    [artifact] = paid["artifacts"]
    assert artifact["parts"]
    final = paid["status"]["message"]["metadata"]
    assert final["x402.payment.status"] == "payment-completed"
    [receipt] = final["x402.payment.receipts"]
    # The receipt is a SettleResponse in the payer's x402 version: the v1 network name, or CAIP-2 on v2.
    network = "base-sepolia" if x402_version == 1 else shop.chain.network
    assert (receipt["success"], receipt["network"]) == (True, network)
    fetched = seen["fetched"]
    assert fetched["status"]["state"] == "completed"
    assert fetched["status"]["message"]["metadata"]["x402.payment.receipts"] == [receipt]
    assert len(fetched["artifacts"]) == 1
    await shop.assert_paid_once(
        tenant=tenant, task_id=asked["id"], payer_key=key, transaction=receipt["transaction"]
    )
