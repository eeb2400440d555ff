"""The official a2a-sdk client against the edge: card discovery, tenants, and every operation, per binding."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import TaskNotFoundError

from tests.fixtures.deadlines import HANG_S

from .conftest import TENANT_A
from .executors import QUESTION, STREAM_STEPS
from .wire import binding

SDK_BINDINGS = {"jsonrpc": TransportProtocol.JSONRPC.value, "rest": TransportProtocol.HTTP_JSON.value}


def tenant_card(card: AgentCard, tenant: str) -> AgentCard:
    """`card` with only `tenant`'s interfaces, so the client factory picks them."""
    narrowed = AgentCard()
    narrowed.CopyFrom(card)
    del narrowed.supported_interfaces[:]
    narrowed.supported_interfaces.extend(i for i in card.supported_interfaces if i.tenant == tenant)
    return narrowed


@pytest.fixture
async def client_factory(
    merchant_url: str, binding_name: str
) -> AsyncIterator[tuple[AgentCard, ClientFactory, ClientFactory]]:
    """The served card, and client factories (non-streaming, streaming) for the binding under test."""
    # A 1.0 client asks for the 1.0 card (ClientFactory sets the same default header on its client).
    async with httpx.AsyncClient(timeout=HANG_S, headers={"A2A-Version": "1.0"}) as http:
        card = await A2ACardResolver(http, merchant_url).get_agent_card()
        factories = tuple(
            ClientFactory(
                ClientConfig(
                    httpx_client=http,
                    supported_protocol_bindings=[SDK_BINDINGS[binding_name]],
                    streaming=streaming,
                )
            )
            for streaming in (False, True)
        )
        yield card, factories[0], factories[1]


def request(text: str, *, task_id: str | None = None) -> SendMessageRequest:
    """SendMessage of one user text, optionally continuing `task_id`."""
    return SendMessageRequest(message=new_text_message(text, task_id=task_id, role=Role.ROLE_USER))


async def collect(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    """Every event of a client call."""
    return [event async for event in events]


async def test_sdk_client_input_required_flow(
    client_factory: tuple[AgentCard, ClientFactory, ClientFactory],
) -> None:
    card, factory, _ = client_factory
    client: Client = factory.create(card)

    [first] = await collect(client.send_message(request("quote")))
    task = first.task
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert task.status.message.parts[0].text == QUESTION
    [second] = await collect(client.send_message(request("M", task_id=task.id)))
    done = second.task

    assert (done.id, done.context_id) == (task.id, task.context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "order: M"
    assert await client.get_task(GetTaskRequest(id=task.id)) == done
    # Anonymous: a list names the context it lists (an empty list otherwise: test_callers).
    listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
    assert [t.id for t in listed.tasks] == [task.id]
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id=str(uuid.uuid4())))
    await client.close()


async def test_sdk_client_streams(client_factory: tuple[AgentCard, ClientFactory, ClientFactory]) -> None:
    card, _, streaming = client_factory
    client = streaming.create(card)

    events = await collect(client.send_message(request("stream")))

    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["task", *["status_update"] * STREAM_STEPS, "artifact_update", "status_update"]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    await client.close()


async def test_sdk_client_subscribe_and_cancel(
    client_factory: tuple[AgentCard, ClientFactory, ClientFactory],
) -> None:
    card, factory, streaming = client_factory
    client, subscriber = factory.create(card), streaming.create(card)
    [first] = await collect(client.send_message(request("quote")))

    events = subscriber.subscribe(SubscribeToTaskRequest(id=first.task.id))
    initial = await anext(events)
    canceled = await client.cancel_task(CancelTaskRequest(id=first.task.id))
    later = await collect(events)

    assert initial.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert later[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    await client.close()
    await subscriber.close()


async def test_sdk_client_talks_to_the_tenant_of_its_interface(
    client_factory: tuple[AgentCard, ClientFactory, ClientFactory], http: httpx.AsyncClient, binding_name: str
) -> None:
    card, factory, _ = client_factory
    client = factory.create(tenant_card(card, TENANT_A))

    [event] = await collect(client.send_message(request("hello")))

    raw_task = await binding(binding_name, http, TENANT_A).get_task(event.task.id)
    assert raw_task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (await binding(binding_name, http).list_tasks())["tasks"] == []
    default_client = factory.create(card)
    with pytest.raises(TaskNotFoundError):
        await default_client.get_task(GetTaskRequest(id=event.task.id))
    await client.close()
    await default_client.close()
