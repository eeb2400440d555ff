"""An active task the SDK's registry creates and cannot start is closed: its queue dispatchers do not stay
pending for the garbage collector to destroy (logged at ERROR as `Task was destroyed but it is pending!`)."""

from __future__ import annotations

import asyncio

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.agent_execution.active_task_registry import ActiveTaskRegistry
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.types import Task, TaskState
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.edge import TenantTaskStore
from a2a_x402.merchant.edge._active_tasks import ClosingActiveTaskRegistry


class _Idle(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Never reached: no task here starts."""

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Never reached."""


def _dispatchers() -> list[asyncio.Task[object]]:
    return [
        task
        for task in asyncio.all_tasks()
        if not task.done() and "_dispatch_loop" in getattr(task.get_coro(), "__qualname__", "")
    ]


async def _refusals(registry: ActiveTaskRegistry, store: TenantTaskStore) -> None:
    caller = ServerCallContext(tenant="acme")
    done = Task(id="t-done", context_id="c-1")
    done.status.state = TaskState.TASK_STATE_COMPLETED
    await store.save(done, caller)
    with pytest.raises(UnsupportedOperationError):
        await registry.get_or_create("t-done", caller)  # a payment presented again to a finished task
    with pytest.raises(TaskNotFoundError):
        await registry.get_or_create("t-unknown", caller)
    with pytest.raises(TaskNotFoundError):
        await registry.get_or_create("t-done", ServerCallContext(tenant="globex"))  # another tenant's


async def test_a_task_refused_at_start_leaves_no_dispatcher_pending(engine: AsyncEngine) -> None:
    store = TenantTaskStore(engine)
    registry = ClosingActiveTaskRegistry(_Idle(), store)
    before = set(_dispatchers())

    await _refusals(registry, store)
    await asyncio.sleep(0)  # the cancelled dispatchers finish

    assert set(_dispatchers()) - before == set()
    await registry.aclose()


@pytest.mark.error_logs(
    "why: the SDK's registry alone leaks its dispatchers, which asyncio and OpenTelemetry log"
)
async def test_the_sdk_registry_alone_leaves_them_pending(engine: AsyncEngine) -> None:
    # What the fix is for: without it, refusals leave dispatchers behind.
    store = TenantTaskStore(engine)
    registry = ActiveTaskRegistry(_Idle(), store)
    before = set(_dispatchers())

    await _refusals(registry, store)
    await asyncio.sleep(0)

    leaked = set(_dispatchers()) - before
    assert len(leaked) >= 2
    for task in leaked:  # cleaned up here, so they do not trouble the rest of the run
        task.cancel()
    await asyncio.gather(*leaked, return_exceptions=True)
    await registry.aclose()
