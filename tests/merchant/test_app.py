"""The reference merchant as `build_app` composes it, paid through the official a2a-sdk client.

The SDK client finds the merchant from its card, activates the extension per call, and pays on every
binding (JSON-RPC, HTTP+JSON, gRPC); the money lands with the right tenant's payee and in that tenant's
books. Offers survive a restart of the merchant between the offer and the payment.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client
from a2a.helpers import new_text_message
from a2a.types import (
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI, PaymentCompletedData, PaymentVerifiedData
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    BINDINGS,
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    activation,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
    sdk_client,
    sdk_payment_message,
    user_message,
    write_tenants_file,
)

from .payments.flows import address_of

TEXT = "The quick brown fox. The dog sleeps."


@pytest.fixture(params=BINDINGS)
def binding(request: pytest.FixtureRequest) -> str:
    """Each A2A binding in turn."""
    name: str = request.param
    return name


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """A plain httpx client for the SDK (it adds `A2A-Version`; the extension is activated per call)."""
    async with httpx.AsyncClient(timeout=HANG_S) as client:
        yield client


async def events(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    """Every response of one SDK `send_message`, with the extension activated."""
    return [event async for event in client.send_message(request, context=activation())]


def ask(text: str = TEXT) -> SendMessageRequest:
    """The request for the priced skill."""
    return SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))


async def test_sdk_client_pays_and_gets_the_artifact(
    merchant: RunningMerchant,
    binding: str,
    http: httpx.AsyncClient,
    chain: DevChain,
    new_payer: Callable[..., str],
) -> None:
    key = new_payer()
    payer = address_of(key)
    client = await sdk_client(http, merchant.base_url, binding, streaming=False)
    [asked] = await events(client, ask())
    task = asked.task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    [terms] = offered_terms(task).accepts
    assert (terms.pay_to, terms.amount, terms.asset) == (DEFAULT_PAY_TO, DEFAULT_PRICE, chain.asset)
    before = (chain.balance_of(payer), chain.balance_of(DEFAULT_PAY_TO))

    # The SDK sends x402Version as 2.0: metadata is a protobuf Struct, whose numbers are doubles.
    [paid] = await events(
        client, SendMessageRequest(message=sdk_payment_message(task.id, sign_payment(key, terms)))
    )

    done = paid.task
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = done.artifacts
    assert artifact.name == "text-stats"
    assert MessageToDict(artifact.parts[0].data)["words"] == 7
    completed = payment_data(done)
    assert isinstance(completed, PaymentCompletedData)
    [receipt] = completed.receipts
    assert receipt.success and receipt.payer == payer
    assert await client.get_task(GetTaskRequest(id=task.id)) == done
    assert (chain.balance_of(payer), chain.balance_of(DEFAULT_PAY_TO)) == (
        before[0] - DEFAULT_PRICE,
        before[1] + DEFAULT_PRICE,
    )
    [entry] = await ledger_entries(merchant.database_url)
    assert (entry.task_id, entry.tx_hash, entry.amount, entry.payer) == (
        task.id,
        receipt.transaction,
        DEFAULT_PRICE,
        payer,
    )
    await client.close()


async def test_sdk_streaming_client_sees_every_stage(
    merchant: RunningMerchant, binding: str, http: httpx.AsyncClient, new_payer: Callable[..., str]
) -> None:
    payer_key = new_payer()
    client = await sdk_client(http, merchant.base_url, binding, streaming=True)
    asked = await events(client, ask())
    assert [event.WhichOneof("payload") for event in asked] == ["task", "status_update"]
    task = asked[0].task
    required = asked[1].status_update
    assert required.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    [terms] = offered_terms(required).accepts  # the update carries the terms as the task does

    paid = await events(
        client, SendMessageRequest(message=sdk_payment_message(task.id, sign_payment(payer_key, terms)))
    )

    assert [event.WhichOneof("payload") for event in paid] == [
        "status_update",
        "artifact_update",
        "status_update",
    ]
    verified, artifact, completed = paid
    assert verified.status_update.status.state == TaskState.TASK_STATE_WORKING
    assert payment_data(verified.status_update) == PaymentVerifiedData()
    assert artifact.artifact_update.artifact.name == "text-stats"
    assert completed.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert isinstance(payment_data(completed.status_update), PaymentCompletedData)
    await client.close()


async def test_offer_survives_a_restart(
    start_merchant: MerchantStarter,
    database_url: str,
    binding: str,
    chain: DevChain,
    new_payer: Callable[..., str],
) -> None:
    """The terms are stored with the task: a merchant started afresh on the database takes the payment."""
    payer_key = new_payer()
    first = start_merchant(database_url)
    async with first.http() as http:
        task = (await MerchantWire(http, binding).send(user_message(TEXT)))["task"]
    first.stop()
    [terms] = offered_terms(task).accepts

    second = start_merchant(database_url)
    async with second.http() as http:
        wire = MerchantWire(http, binding)
        assert (await wire.get_task(task["id"]))["status"] == task["status"]
        done = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms))))["task"]

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["name"] == "text-stats"
    [entry] = await ledger_entries(database_url)
    assert (entry.task_id, entry.context_id) == (task["id"], task["contextId"])


async def test_each_tenant_is_paid_and_booked(
    start_merchant: MerchantStarter,
    database_url: str,
    binding: str,
    http: httpx.AsyncClient,
    chain: DevChain,
    new_payer: Callable[..., str],
    tmp_path: Path,
) -> None:
    merchant = start_merchant(database_url, tenants_file=write_tenants_file(tmp_path / "t.toml", TWO_TENANTS))
    payer_key = new_payer()
    payer = address_of(payer_key)
    payee_before = {tenant: chain.balance_of(pay_to) for tenant, (pay_to, _) in TWO_TENANTS.items()}
    payer_before = chain.balance_of(payer)
    tasks = {}
    for tenant, (pay_to, price) in TWO_TENANTS.items():
        client = await sdk_client(http, merchant.base_url, binding, streaming=False, tenant=tenant)
        [asked] = await events(client, ask())
        [terms] = offered_terms(asked.task).accepts
        assert (terms.pay_to, terms.amount) == (pay_to, price)
        message = sdk_payment_message(asked.task.id, sign_payment(payer_key, terms))
        [paid] = await events(client, SendMessageRequest(message=message))
        assert paid.task.status.state == TaskState.TASK_STATE_COMPLETED
        tasks[tenant] = paid.task
        await client.close()

    for tenant, (pay_to, price) in TWO_TENANTS.items():
        assert chain.balance_of(pay_to) == payee_before[tenant] + price
        [entry] = await ledger_entries(merchant.database_url, tenant=tenant)
        completed = payment_data(tasks[tenant])
        assert isinstance(completed, PaymentCompletedData)
        assert (entry.task_id, entry.context_id) == (tasks[tenant].id, tasks[tenant].context_id)
        assert (entry.pay_to, entry.amount, entry.payer) == (pay_to, price, payer)
        assert entry.tx_hash == completed.receipts[-1].transaction
        assert entry.lines == (("credit", price, "revenue"), ("debit", price, "payer"))
    assert chain.balance_of(payer) == payer_before - sum(price for _, price in TWO_TENANTS.values())
    assert len(await ledger_entries(merchant.database_url)) == len(TWO_TENANTS)


async def test_card_declares_the_extension_required(sqlite_url: str, start_merchant: MerchantStarter) -> None:
    merchant = start_merchant(sqlite_url)
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card = await A2ACardResolver(http, merchant.base_url).get_agent_card(
            http_kwargs={"headers": {"A2A-Version": "1.0"}}
        )

    [declared] = [e for e in card.capabilities.extensions if e.uri == EXTENSION_URI]
    assert declared.required
    params = MessageToDict(declared.params)
    assert params["payTo"] == [
        {"network": merchant.settings.network, "address": DEFAULT_PAY_TO}  # the default tenant: no member
    ]


async def test_each_tenants_extended_card_is_the_same_on_every_binding(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path
) -> None:
    """GetExtendedAgentCard answers a tenant with its own card, listing its gRPC interface too, and the
    three bindings answer with the same card."""
    merchant = start_merchant(sqlite_url, tenants_file=write_tenants_file(tmp_path / "t.toml", TWO_TENANTS))
    async with merchant.http() as http:
        for tenant, (pay_to, _) in TWO_TENANTS.items():
            cards = [await _extended_card(http, binding, tenant, merchant.base_url) for binding in BINDINGS]
            assert cards[1:] == cards[:-1]
            card = cards[0]
            interfaces = card["supportedInterfaces"]
            assert {i["tenant"] for i in interfaces} == {tenant}
            assert {i["protocolBinding"]: i["url"] for i in interfaces}["GRPC"] == merchant.grpc_target
            [declared] = [e for e in card["capabilities"]["extensions"] if e["uri"] == EXTENSION_URI]
            assert [p["address"] for p in declared["params"]["payTo"]] == [pay_to]


async def _extended_card(http: httpx.AsyncClient, binding: str, tenant: str, base_url: str) -> dict[str, Any]:
    client = await sdk_client(http, base_url, binding, streaming=False, tenant=tenant)
    try:
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest(), context=activation())
    finally:
        await client.close()
    answer: dict[str, Any] = MessageToDict(card)
    return answer
