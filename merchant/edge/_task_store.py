"""The A2A task store: the SDK's `DatabaseTaskStore`, with each save and read one SQL statement.

The SDK saves a task through an ORM session merge: it loads the stored row, compares every JSON column
(the whole history, each time) and then updates it, and it reads through an ORM session too. A paid task
is saved half a dozen times with its payment terms and receipts in its history, so that unit-of-work
machinery was the largest single cost of a paid turn. Here a save is one `INSERT … ON CONFLICT DO
UPDATE` and a read one `SELECT`, on the same table, with the same JSON the SDK writes (its own
`_to_orm`/`_from_orm` convert), scoped to the same owner. Listing and deleting stay the SDK's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task, TaskState
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

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
        self._table: sa.Table = self.task_model.__table__  # type: ignore[assignment]
        mapper = sa.inspect(self.task_model)
        # Attribute name -> column: `task_metadata` is stored in the column `metadata`.
        self._columns = {attr.key: attr.columns[0] for attr in mapper.column_attrs}
        self._select = sa.select(*(column.label(key) for key, column in self._columns.items()))
        # Built once (the values come with each call): building an upsert's `excluded` columns per save
        # cost more than running it.
        insert = (postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert)(self._table)
        self._upsert = insert.on_conflict_do_update(
            index_elements=[self._table.c.id],
            set_={
                column.name: insert.excluded[column.name]
                for column in self._table.c
                if not column.primary_key
            },
            where=self._table.c.owner == insert.excluded.owner,
        )

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Insert or replace the task, for the tenant of `context` only.

        Raises:
            TaskOwnedElsewhereError: the task id is stored for another tenant.
        """
        model = self._to_orm(task, self.owner_resolver(context))
        values: dict[str, Any] = {column.name: getattr(model, key) for key, column in self._columns.items()}
        async with self.engine.begin() as connection:
            if (await connection.execute(self._upsert, values)).rowcount != 1:
                raise TaskOwnedElsewhereError(f"task {task.id} belongs to another tenant")
            if self._on_final is not None and task.status.state in FINAL_STATES:
                await self._on_final(connection, task.id, task.status.state)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The task, if it is stored for the tenant of `context`."""
        statement = self._select.where(
            self._columns["id"] == task_id, self._columns["owner"] == self.owner_resolver(context)
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(statement)).first()
        if row is None:
            return None
        # `_from_orm` only reads attributes, so the row's values stand in for a loaded model.
        return self._from_orm(SimpleNamespace(**row._mapping))  # type: ignore[arg-type]
