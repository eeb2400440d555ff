"""`TenantTaskStore` keeps tasks exactly as the SDK's `DatabaseTaskStore` does, one statement per save or
read, and never lets one tenant's save overwrite another tenant's task."""

from __future__ import annotations

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Artifact, Message, Part, Role, Task, TaskState
from sqlalchemy.ext.asyncio import AsyncEngine

from merchant.edge import TaskOwnedElsewhereError, TenantTaskStore, tenant_owner


def _task(task_id: str, state: TaskState, text: str) -> Task:
    task = Task(id=task_id, context_id="ctx-1")
    task.status.state = state
    task.status.timestamp.GetCurrentTime()
    message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text=text)], task_id=task_id)
    message.metadata.update({"x402.payment.status": "payment-required", "x402": {"x402Version": 2}})
    task.history.append(message)
    task.artifacts.append(Artifact(artifact_id="a-1", name="stats", parts=[Part(text="42")]))
    task.metadata.update({"priority": "high"})
    return task


async def test_what_it_saves_the_sdk_reads_back_and_the_reverse(engine: AsyncEngine) -> None:
    ours, sdk = (
        TenantTaskStore(engine),
        DatabaseTaskStore(engine, create_table=False, owner_resolver=tenant_owner),
    )
    tenant = ServerCallContext(tenant="acme")
    first, second = (
        _task("t-1", TaskState.TASK_STATE_WORKING, "hi"),
        _task("t-2", TaskState.TASK_STATE_WORKING, "yo"),
    )

    await ours.save(first, tenant)
    await sdk.save(second, tenant)
    first.status.state = TaskState.TASK_STATE_COMPLETED
    await ours.save(first, tenant)  # the second save of a task replaces it

    assert await sdk.get("t-1", tenant) == first
    assert await ours.get("t-2", tenant) == second
    assert await ours.get("t-1", tenant) == first
    assert await ours.get("t-3", tenant) is None


async def test_a_task_is_seen_and_saved_only_by_its_tenant(engine: AsyncEngine) -> None:
    store = TenantTaskStore(engine)
    acme, globex = ServerCallContext(tenant="acme"), ServerCallContext(tenant="globex")
    kept = _task("t-1", TaskState.TASK_STATE_WORKING, "acme's")
    await store.save(kept, acme)

    assert await store.get("t-1", globex) is None
    with pytest.raises(TaskOwnedElsewhereError):
        await store.save(_task("t-1", TaskState.TASK_STATE_FAILED, "globex's"), globex)
    assert await store.get("t-1", acme) == kept
