"""The A2A task store: the SDK's `DatabaseTaskStore`, with each save and read one SQL statement.

The SDK saves a task through an ORM session merge: it loads the stored row, compares every JSON column
(the whole history, each time) and then updates it, and it reads through an ORM session too. A paid task
is saved half a dozen times with its payment terms and receipts in its history, so that unit-of-work
machinery was the largest single cost of a paid turn. Here a save is one `INSERT … ON CONFLICT DO
UPDATE` and a read one `SELECT`, on the same table, with the same JSON the SDK writes (its own
`_to_orm`/`_from_orm` convert), scoped to the same owner. Listing and deleting stay the SDK's.

A read the same request already made, with no save of this process since, is answered from memory
(`merchant._task_reads`): a paid SendMessage reads its task six times and saves it in between only here.
Each save writes the whole history again; a message's JSON form (history, status, artifact) is converted
once, by content, and the row's values are built straight from the task, as the SDK's `_to_orm` maps it,
with no ORM instance and no copy of the task in between.

On PostgreSQL a read, and a save that needs no write of the caller's with it, is one statement on a
connection in autocommit: no `BEGIN` and `COMMIT` (or `ROLLBACK`) round trips around it, which had been
two thirds of the round trips of a paid task's reads and saves. A save of a task in progress (the request
has the task as stored, and the save is a working state or adds a message with the status unchanged) also
does not wait for its WAL flush (`synchronous_commit` off for its own transaction, set by the statement):
a flush is the largest part of a commit on a disk that syncs slowly (4.3 ms on this VM while other work
wrote to it, 0.4 ms when idle), and a paid turn saves three such states. The WAL is written in order, so
any later commit that waits (the turn's final state, an offer write, the facilitator's claim, a booking)
makes them durable too. Only a crash of PostgreSQL or its machine can lose them: every one committed since
the last flush, as though the crash had come before they were saved. A turn's end (input required, a
final state), a task's first save and every payment record still wait for their flush.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message as ProtoMessage
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from a2a_x402.storage import write, write_transaction

from .._task_reads import TaskReads
from ._tenancy import tenant_owner

__all__ = ["FinalStateHook", "TaskOwnedElsewhereError", "TenantTaskStore"]

FinalStateHook = Callable[[AsyncConnection, str, TaskState], Awaitable[None]]
"""A write of the caller's (given the task id and its final state) committed with the save of that state."""

FINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


# Messages of this many recent tasks' worth (a paid task has about five, and a status and an artifact or
# two) stay converted, each at most _MESSAGE_DICT_MAX_BYTES serialized: a client's large messages are
# converted at every save instead of filling memory.
_MESSAGE_DICTS_KEPT = 4096
_MESSAGE_DICT_MAX_BYTES = 4096


class TaskOwnedElsewhereError(RuntimeError):
    """A task id already stored for another owner (tenant): the save is refused rather than overwrite it."""


class TenantTaskStore(DatabaseTaskStore):
    """Tasks in the migrated `tasks` table of `engine`, owned by the request's tenant.

    `on_final` runs in the transaction that stores a task's final state (the payment layer records there
    that the task was told how its payment was decided).
    """

    def __init__(self, engine: AsyncEngine, *, on_final: FinalStateHook | None = None) -> None:
        super().__init__(engine, create_table=False, owner_resolver=tenant_owner)
        self._on_final = on_final
        self._reads = TaskReads()
        self._dicts = _MessageDicts()
        self._table: sa.Table = self.task_model.__table__  # type: ignore[assignment]
        mapper = sa.inspect(self.task_model)
        # Attribute name -> column: `task_metadata` is stored in the column `metadata`.
        self._columns = {attr.key: attr.columns[0] for attr in mapper.column_attrs}
        self._select = sa.select(*(column.label(key) for key, column in self._columns.items()))
        # Built once (the values come with each call): building an upsert's `excluded` columns per save
        # cost more than running it.
        postgres = engine.dialect.name == "postgresql"
        self._upsert = _upsert((postgresql.insert if postgres else sqlite.insert)(self._table))
        self._autocommit: AsyncEngine | None = None
        self._unflushed_upsert: sa.Insert | None = None
        # On SQLite a save that stores nothing else goes to the writer thread (`storage.write`) with the
        # other writes queued meanwhile: through aiosqlite each save held the database's one write lock
        # for about 4 ms of thread hops at 32 concurrent paid tasks, half of all the time it was held.
        self._grouped = not postgres
        if postgres:
            self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")
            # The row comes from a SELECT whose condition turns the flush wait off for the statement's own
            # (implicit) transaction: still one statement, one round trip.
            source = sa.select(
                *(sa.bindparam(f"v_{column.name}", type_=column.type) for column in self._table.c)
            ).where(sa.literal_column("set_config('synchronous_commit', 'off', true)") == "off")
            self._unflushed_upsert = _upsert(
                postgresql.insert(self._table).from_select([column.name for column in self._table.c], source)
            )

    def _values(self, task: Task, owner: str) -> dict[str, Any]:
        """The row of `task` by column name, as the SDK's `_to_orm` maps it (the columns hold the JSON
        form of the protos), each message converted once per content (`_MessageDicts`)."""
        status = task.status
        return {
            "id": task.id,
            "context_id": task.context_id,
            "kind": "task",
            "owner": owner,
            "last_updated": status.timestamp.ToDatetime() if status.HasField("timestamp") else None,
            "status": self._dicts.dict_of(status),
            "artifacts": [self._dicts.dict_of(artifact) for artifact in task.artifacts],
            "history": [self._dicts.dict_of(message) for message in task.history],
            "protocol_version": "1.0",
            "metadata": MessageToDict(task.metadata) if task.metadata.fields else None,
        }

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Insert or replace the task, for the tenant of `context` only.

        Raises:
            TaskOwnedElsewhereError: the task id is stored for another tenant.
        """
        owner = self.owner_resolver(context)
        stored = self._reads.stored(context, owner, task.id)
        if stored is not None and _only_a_message_arrived(stored, task):
            # The SDK stores a message arriving on a task before the turn's first event, and stores that
            # event at once after: the event's save writes the message too, and no one can tell the two
            # apart in between (the message is no event), so the first is left to it.
            self._reads.saved(context, owner, task)
            return
        values = self._values(task, owner)
        with_final = self._on_final is not None and task.status.state in FINAL_STATES
        in_progress = self._unflushed_upsert is not None and self._in_progress(stored, task)
        self._reads.saving(owner, task.id)
        try:
            if self._autocommit is not None and not with_final:
                async with self._autocommit.connect() as connection:
                    if in_progress and self._unflushed_upsert is not None:
                        unflushed = {f"v_{name}": value for name, value in values.items()}
                        written = (await connection.execute(self._unflushed_upsert, unflushed)).rowcount
                    else:
                        written = (await connection.execute(self._upsert, values)).rowcount
                if written != 1:
                    raise TaskOwnedElsewhereError(f"task {task.id} belongs to another tenant")
            elif self._grouped and not with_final:
                if await write(self.engine, _upserted(self._upsert, values), isolated=True) != 1:
                    raise TaskOwnedElsewhereError(f"task {task.id} belongs to another tenant")
            else:
                async with write_transaction(self.engine) as connection:
                    if (await connection.execute(self._upsert, values)).rowcount != 1:
                        raise TaskOwnedElsewhereError(f"task {task.id} belongs to another tenant")
                    if with_final and self._on_final is not None:
                        await self._on_final(connection, task.id, task.status.state)
        except BaseException:
            # The write may have landed before the failure: a read taken during it is stale too.
            self._reads.saving(owner, task.id)
            raise
        self._reads.saved(context, owner, task)

    def _in_progress(self, stored: Task | None, task: Task) -> bool:
        """Whether saving `task` neither creates it nor ends a turn: the request has it as `stored`, and it
        is working or its status is unchanged (an artifact or a message added)."""
        state = task.status.state
        if stored is None or state in FINAL_STATES:
            return False
        return state == TaskState.TASK_STATE_WORKING or stored.status == task.status

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the task (the SDK's delete); every remembered read of it is stale from now on."""
        owner = self.owner_resolver(context)
        self._reads.saving(owner, task_id)
        await super().delete(task_id, context)
        self._reads.saving(owner, task_id)  # a read that began during the delete may have seen the row

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task, if it is stored for the tenant of `context`: as this request last read or saved it
        when no save of this process has happened since."""
        owner = self.owner_resolver(context)
        remembered = self._reads.recall(context, owner, task_id)
        if remembered is not None:
            return remembered.task
        # Taken before the read: a save finishing while it runs makes this read stale at once.
        generation = self._reads.generation(owner, task_id)
        statement = self._select.where(self._columns["id"] == task_id, self._columns["owner"] == owner)
        async with (self._autocommit or self.engine).connect() as connection:
            row = (await connection.execute(statement)).first()
        # `_from_orm` only reads attributes, so the row's values stand in for a loaded model.
        task = None if row is None else self._from_orm(SimpleNamespace(**row._mapping))  # type: ignore[arg-type]
        self._reads.remember(context, owner, task_id, task, generation)
        return task


def _upserted(upsert: sa.Insert, values: dict[str, Any]) -> Callable[[sa.Connection], int]:
    """The write of one task's upsert on the writer's connection: the rows it wrote (0 if the task is
    another tenant's)."""
    return lambda connection: connection.execute(upsert, values).rowcount


def _only_a_message_arrived(stored: Task, task: Task) -> bool:
    """Whether `task` is `stored` as the SDK saves it when one message arrives, and nothing else: the stored
    status message (if any) moved into the history, then the one new message, the status otherwise as it
    was. A status update moving the status message without a message after it is not that, and is saved."""
    if task.status.state in FINAL_STATES or task.status.HasField("message"):
        return False
    moved = [stored.status.message] if stored.status.HasField("message") else []
    known = len(stored.history)
    if len(task.history) != known + len(moved) + 1:
        return False
    return (
        task.status.state == stored.status.state
        and task.status.timestamp == stored.status.timestamp
        and task.artifacts == stored.artifacts
        and task.metadata == stored.metadata
        and task.context_id == stored.context_id
        and list(task.history[:known]) == list(stored.history)
        and list(task.history[known:-1]) == moved
    )


def _upsert(insert: Any) -> sa.Insert:
    """`insert` (PostgreSQL's or SQLite's) replacing a stored row of the same id and owner only."""
    table: sa.Table = insert.table
    upsert: sa.Insert = insert.on_conflict_do_update(
        index_elements=[table.c.id],
        set_={column.name: insert.excluded[column.name] for column in table.c if not column.primary_key},
        where=table.c.owner == insert.excluded.owner,
    )
    return upsert


class _MessageDicts:
    """The JSON form of a task's messages, by their content: each save writes the whole history, the
    status and the artifacts again, and `MessageToDict` of them was the largest part of a save's CPU."""

    def __init__(self) -> None:
        self._dicts: OrderedDict[tuple[str, bytes], dict[str, Any]] = OrderedDict()

    def dict_of(self, message: ProtoMessage) -> dict[str, Any]:
        # Equal serializations of one type are equal messages: the key is the content, never an identity.
        content = message.SerializeToString(deterministic=True)
        key = (message.DESCRIPTOR.full_name, content)
        converted = self._dicts.get(key)
        if converted is None:
            converted = MessageToDict(message)
            if len(content) > _MESSAGE_DICT_MAX_BYTES:
                return converted
            self._dicts[key] = converted
            if len(self._dicts) > _MESSAGE_DICTS_KEPT:
                self._dicts.popitem(last=False)
        return converted
