"""The a2a-sdk 1.3 Python client, used directly, pays the reference merchant on A2A 1.0 (extension v0.3).

The A2A traffic is entirely the SDK's: its card resolver, `ClientFactory` and transports, its protobuf
types and its service parameters (`with_a2a_extensions`). Only the EIP-3009 authorization is signed with
our `payer.sign_payment` (the brief's allowance; the payment run of `payer.Payer` is not used). Every
binding x blocking/streaming x default/named tenant ends with the task completed, its artifact and receipt
on the client's side, and the payee credited exactly once on chain and in the ledger.
"""

from __future__ import annotations

from typing import Any

import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.helpers import new_text_message
from a2a.types import AgentCard, GetTaskRequest, Message, Role, SendMessageRequest, StreamResponse, Task
from a2a.types import TaskState as State
from a2a.utils.constants import PROTOCOL_VERSION_1_0, VERSION_HEADER, TransportProtocol
from google.protobuf.json_format import MessageToDict

from a2a_x402.extension import EXTENSION_URI
from a2a_x402.facilitator.wire import PaymentRequired
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S, wait_until

from .conftest import NAMED_TENANT, TENANTS, TEXT, Shop

TRANSPORTS = {
    "jsonrpc": TransportProtocol.JSONRPC,
    "http+json": TransportProtocol.HTTP_JSON,
    "grpc": TransportProtocol.GRPC,
}
"""The SDK transports the merchant serves, by test id; only `client_config` is binding-specific."""

JSON = dict[str, Any]


def client_config(http: httpx.AsyncClient, transport: str, *, streaming: bool) -> ClientConfig:
    """The SDK client's configuration for one transport (gRPC opens plaintext channels to loopback)."""
    return ClientConfig(
        httpx_client=http,
        supported_protocol_bindings=[TRANSPORTS[transport]],
        streaming=streaming,
        grpc_channel_factory=grpc.aio.insecure_channel,
    )


def tenant_card(card: AgentCard, tenant: str) -> AgentCard:
    """`card` listing only `tenant`'s A2A 1.0 interfaces.

    The SDK's `ClientFactory` has no tenant option: it takes the first 1.0 interface of the binding, which
    on this card is the default tenant's. A client that wants another tenant narrows the card (the
    factory then wraps the transport in its `TenantTransportDecorator`) or sets `tenant` on every request.
    """
    narrowed = AgentCard()
    narrowed.CopyFrom(card)
    del narrowed.supported_interfaces[:]
    narrowed.supported_interfaces.extend(
        i
        for i in card.supported_interfaces
        if i.tenant == tenant and i.protocol_version == PROTOCOL_VERSION_1_0
    )
    return narrowed


def extension_data(message: Message) -> JSON:
    """The x402 extension's metadata object on a message, as JSON (integral numbers as ints).

    The SDK's metadata is a protobuf `Struct`, whose numbers are all doubles: `maxTimeoutSeconds` 300
    comes back as 300.0, which the x402 models refuse as an integer field. Integral doubles are ints here.
    """
    data: JSON = _integral(MessageToDict(message.metadata))[EXTENSION_URI]
    return data


def _integral(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


async def send(client: Client, message: Message, context: ClientCallContext) -> list[StreamResponse]:
    """Every event the SDK yields for one SendMessage (one Task when blocking, the stream otherwise)."""
    return [
        event async for event in client.send_message(SendMessageRequest(message=message), context=context)
    ]


async def followed_to_its_end(client: Client, task_id: str, context: ClientCallContext) -> Task:
    """The task as `GetTask` shows it once out of TASK_STATE_WORKING: a settlement still pending when the
    merchant answers leaves it working, and the client follows it (spec §7, T9)."""
    seen: list[Task] = []

    async def ended() -> bool:
        seen[:] = [await client.get_task(GetTaskRequest(id=task_id), context=context)]
        return seen[0].status.state != State.TASK_STATE_WORKING

    await wait_until(ended, what=f"task {task_id} to leave TASK_STATE_WORKING")
    return seen[0]


def last_status_message(events: list[StreamResponse]) -> tuple[int, Message]:
    """The state and status message the events end with (a Task, or the stream's last status update)."""
    last = events[-1]
    kind = last.WhichOneof("payload")
    if kind == "task":
        return last.task.status.state, last.task.status.message
    assert kind == "status_update", last
    return last.status_update.status.state, last.status_update.status.message


@pytest.mark.parametrize("tenant", TENANTS, ids=["default-tenant", NAMED_TENANT])
@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_sdk_client_pays_and_the_payee_is_credited_once(
    shop: Shop, transport: str, streaming: bool, tenant: str
) -> None:
    key = shop.new_payer()
    context = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([EXTENSION_URI])])
    )
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card = await A2ACardResolver(http, shop.base_url).get_agent_card(
            http_kwargs={"headers": {VERSION_HEADER: PROTOCOL_VERSION_1_0}}
        )
        config = client_config(http, transport, streaming=streaming)
        client = ClientFactory(config).create(tenant_card(card, tenant))

        asked = await send(client, new_text_message(TEXT, role=Role.ROLE_USER), context)
        state, status = last_status_message(asked)
        assert state == State.TASK_STATE_INPUT_REQUIRED
        required = extension_data(status)
        assert required["status"] == "payment-required"
        [option] = PaymentRequired.from_wire(required["required"]).accepts
        assert (option.pay_to, option.amount) == (shop.pay_to(tenant), shop.price(tenant))
        task_id = asked[0].task.id if asked[0].HasField("task") else asked[0].status_update.task_id

        payment = new_text_message("Here is my payment.", task_id=task_id, role=Role.ROLE_USER)
        payload = sign_payment(key, option).to_json_dict()
        payment.metadata.update({EXTENSION_URI: {"status": "payment-submitted", "payload": payload}})
        payment.extensions.append(EXTENSION_URI)
        paid = await send(client, payment, context)
        fetched = await followed_to_its_end(client, task_id, context)
        await client.close()

    state, status = last_status_message(paid)
    if state == State.TASK_STATE_WORKING:
        # A settlement slower than the merchant's budget (a loaded machine): the answer says the payment is
        # verified and its settlement pending (spec §7, T9); the task's end is the one GetTask followed.
        assert extension_data(status)["status"] == "payment-verified"
        state, status = fetched.status.state, fetched.status.message
    elif streaming:
        kinds = [event.WhichOneof("payload") for event in paid]
        assert "artifact_update" in kinds, kinds
    else:
        assert paid[0].task.artifacts
    assert state == State.TASK_STATE_COMPLETED
    completed = extension_data(status)
    assert completed["status"] == "payment-completed"
    [receipt] = completed["receipts"]
    assert (receipt["success"], receipt["network"]) == (True, shop.chain.network)
    assert fetched.status.state == State.TASK_STATE_COMPLETED
    [artifact] = fetched.artifacts
    assert artifact.parts
    assert extension_data(fetched.status.message)["receipts"] == [receipt]
    await shop.assert_paid_once(
        tenant=tenant, task_id=task_id, payer_key=key, transaction=receipt["transaction"]
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_sdk_factory_takes_the_first_tenants_interface_of_the_card(
    shop: Shop, transport: str
) -> None:
    # The counterpart of the JS SDK's choice (tests/interop/test_a2a_js.py): unnarrowed, this factory takes
    # the first 1.0 interface of the binding, the default tenant's, and is offered the default tenant's terms.
    context = ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([EXTENSION_URI])])
    )
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card = await A2ACardResolver(http, shop.base_url).get_agent_card(
            http_kwargs={"headers": {VERSION_HEADER: PROTOCOL_VERSION_1_0}}
        )
        config = client_config(http, transport, streaming=False)
        client = ClientFactory(config).create(card)
        asked = await send(client, new_text_message(TEXT, role=Role.ROLE_USER), context)
        await client.close()

    _, status = last_status_message(asked)
    [option] = PaymentRequired.from_wire(extension_data(status)["required"]).accepts
    assert option.pay_to == shop.pay_to("")
