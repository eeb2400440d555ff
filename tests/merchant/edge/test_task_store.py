"""`TenantTaskStore` keeps tasks exactly as the SDK's `DatabaseTaskStore` does, one statement per save or
read, and never lets one tenant's save overwrite another tenant's task."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Artifact, Message, Part, Role, Task, TaskState
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant._task_reads import forget_task_reads
from a2a_x402.merchant.edge import TaskOwnedElsewhereError, TenantTaskStore, tenant_owner


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


async def test_its_rows_hold_what_the_sdk_writes_for_the_same_task(engine: AsyncEngine) -> None:
    # The row's values, column by column, against the SDK's own mapping of the same task.
    ours = TenantTaskStore(engine)
    task = _task("t-1", TaskState.TASK_STATE_WORKING, "hi")
    task.status.message.CopyFrom(task.history[0])  # a status message too, converted like the history
    sdk_model = DatabaseTaskStore._to_orm(ours, task, "acme")
    mapper = sa.inspect(type(sdk_model))
    sdk_row = {attr.columns[0].name: getattr(sdk_model, attr.key) for attr in mapper.column_attrs}

    assert ours._values(task, "acme") == sdk_row
    assert ours._values(task, "acme") == sdk_row  # the second time from its converted messages
    task.artifacts[0].parts[0].text = "43"
    assert ours._values(task, "acme")["artifacts"] == [
        {"artifactId": "a-1", "name": "stats", "parts": [{"text": "43"}]}
    ]


async def test_a_task_is_seen_and_saved_only_by_its_tenant(engine: AsyncEngine) -> None:
    store = TenantTaskStore(engine)
    acme, globex = ServerCallContext(tenant="acme"), ServerCallContext(tenant="globex")
    kept = _task("t-1", TaskState.TASK_STATE_WORKING, "acme's")
    await store.save(kept, acme)

    assert await store.get("t-1", globex) is None
    with pytest.raises(TaskOwnedElsewhereError):
        await store.save(_task("t-1", TaskState.TASK_STATE_FAILED, "globex's"), globex)
    assert await store.get("t-1", acme) == kept


def _count_selects(engine: AsyncEngine) -> list[str]:
    selects: list[str] = []

    @sa.event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            selects.append(statement)

    return selects


async def test_a_request_reads_a_task_once_until_a_save_of_this_process(engine: AsyncEngine) -> None:
    store = TenantTaskStore(engine)
    writer, request = ServerCallContext(tenant="acme"), ServerCallContext(tenant="acme")
    await store.save(_task("t-1", TaskState.TASK_STATE_INPUT_REQUIRED, "hi"), writer)
    selects = _count_selects(engine)

    first = await store.get("t-1", request)
    assert first is not None
    first.status.state = TaskState.TASK_STATE_FAILED  # the SDK edits what it reads: never shared
    again = await store.get("t-1", request)
    assert again is not None and again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert len(selects) == 1

    moved = _task("t-1", TaskState.TASK_STATE_WORKING, "hi")
    await store.save(moved, writer)  # another request's save: this request's read is stale
    assert await store.get("t-1", request) == moved
    assert len(selects) == 2

    moved.status.state = TaskState.TASK_STATE_COMPLETED
    await store.save(moved, request)  # its own save is what it reads next, without a statement
    assert await store.get("t-1", request) == moved
    assert len(selects) == 2
    assert await store.get("t-1", ServerCallContext(tenant="acme")) == moved  # a new request reads afresh
    assert len(selects) == 3


async def test_a_write_elsewhere_is_seen_once_the_request_forgets_its_reads(engine: AsyncEngine) -> None:
    ours = TenantTaskStore(engine)
    elsewhere = TenantTaskStore(engine)  # another replica's store: its saves are not this process's
    request = ServerCallContext(tenant="acme")
    assert await ours.get("t-1", request) is None
    saved = _task("t-1", TaskState.TASK_STATE_WORKING, "hi")
    await elsewhere.save(saved, ServerCallContext(tenant="acme"))

    assert await ours.get("t-1", request) is None  # remembered within the request
    forget_task_reads(request)
    assert await ours.get("t-1", request) == saved


async def test_a_deleted_task_is_not_remembered(engine: AsyncEngine) -> None:
    store = TenantTaskStore(engine)
    request = ServerCallContext(tenant="acme")
    await store.save(_task("t-1", TaskState.TASK_STATE_COMPLETED, "hi"), request)
    await store.delete("t-1", request)
    assert await store.get("t-1", request) is None


def _statements(engine: AsyncEngine) -> list[str]:
    seen: list[str] = []

    @sa.event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        seen.append(statement)

    return seen


async def test_only_saves_of_a_task_in_progress_commit_without_waiting_for_their_flush(
    engine: AsyncEngine,
) -> None:
    store = TenantTaskStore(engine)
    statements = _statements(engine)

    async def skips_flush_wait(task: Task, context: ServerCallContext) -> bool:
        before = len(statements)
        await store.save(task, context)
        return any("synchronous_commit" in statement for statement in statements[before:])

    request = ServerCallContext(tenant="acme")
    task = _task("t-1", TaskState.TASK_STATE_INPUT_REQUIRED, "hi")
    deferred = engine.dialect.name == "postgresql"
    assert not await skips_flush_wait(task, request)  # its first save: the task is created
    task.status.state = TaskState.TASK_STATE_WORKING
    assert await skips_flush_wait(task, request) is deferred
    task.artifacts.append(Artifact(artifact_id="a-2", name="more", parts=[Part(text="43")]))
    assert await skips_flush_wait(task, request) is deferred  # the status unchanged, an artifact added
    task.status.state = TaskState.TASK_STATE_INPUT_REQUIRED
    task.status.timestamp.GetCurrentTime()
    assert not await skips_flush_wait(task, request)  # a turn ends
    task.status.state = TaskState.TASK_STATE_WORKING
    assert not await skips_flush_wait(task, ServerCallContext(tenant="acme"))  # a request that never read it
    assert not await skips_flush_wait(task, request)  # nor one whose read that save made stale
    assert await store.get("t-1", request) == task
    assert await skips_flush_wait(task, request) is deferred
    task.status.state = TaskState.TASK_STATE_COMPLETED
    assert not await skips_flush_wait(task, request)
    assert await store.get("t-1", ServerCallContext(tenant="acme")) == task


async def test_a_message_arriving_is_stored_with_the_next_save_of_the_request(engine: AsyncEngine) -> None:
    store = TenantTaskStore(engine)
    request = ServerCallContext(tenant="acme")
    task = _task("t-1", TaskState.TASK_STATE_INPUT_REQUIRED, "hi")
    task.status.message.CopyFrom(Message(message_id="m-0", role=Role.ROLE_AGENT, parts=[Part(text="pay")]))
    await store.save(task, request)
    statements = _statements(engine)

    # What the SDK saves when a message arrives: the status message moved to the history, the message after.
    task.history.append(task.status.message)
    task.status.ClearField("message")
    task.history.append(Message(message_id="m-2", role=Role.ROLE_USER, parts=[Part(text="paid")]))
    await store.save(task, request)
    assert statements == []
    assert await store.get("t-1", request) == task  # the request reads what it saved
    assert statements == []
    before = await store.get("t-1", ServerCallContext(tenant="acme"))
    assert before is not None and len(before.history) == 1  # elsewhere: as before the message

    task.status.state = TaskState.TASK_STATE_WORKING
    await store.save(task, request)
    assert await store.get("t-1", ServerCallContext(tenant="acme")) == task

    other = ServerCallContext(tenant="acme")
    assert await store.get("t-1", other) == task
    task.history.append(Message(message_id="m-3", role=Role.ROLE_USER, parts=[Part(text="more")]))
    task.artifacts.append(Artifact(artifact_id="a-2", name="more", parts=[Part(text="43")]))
    await store.save(task, other)  # more than a message changed: stored at once
    assert await store.get("t-1", ServerCallContext(tenant="acme")) == task


async def test_a_status_update_moving_the_status_message_is_saved_at_once(engine: AsyncEngine) -> None:
    # The same state, no timestamp, the status message moved into the history and no message after it:
    # what a status update looks like, not a message arriving, so nothing may wait for a later save.
    store = TenantTaskStore(engine)
    request = ServerCallContext(tenant="acme")
    task = _task("t-1", TaskState.TASK_STATE_INPUT_REQUIRED, "hi")
    task.status.ClearField("timestamp")
    task.status.message.CopyFrom(Message(message_id="m-0", role=Role.ROLE_AGENT, parts=[Part(text="a")]))
    await store.save(task, request)

    task.history.append(task.status.message)
    task.status.message.CopyFrom(Message(message_id="m-1", role=Role.ROLE_AGENT, parts=[Part(text="b")]))
    await store.save(task, request)
    assert await store.get("t-1", ServerCallContext(tenant="acme")) == task

    task.history.append(task.status.message)
    task.status.ClearField("message")
    await store.save(task, request)
    assert await store.get("t-1", ServerCallContext(tenant="acme")) == task
