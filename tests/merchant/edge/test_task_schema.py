"""Migration m0001 makes exactly the task table a2a-sdk's `DatabaseTaskStore` expects, on both backends.

If a new SDK release changes `TaskModel` (a column, a type, an index), this fails until a migration
follows it.
"""

from __future__ import annotations

from typing import Any, cast

import sqlalchemy as sa
from a2a.server.models import TaskModel
from sqlalchemy.engine import Connection

from a2a_x402.storage import create_engine


def _reflect_tasks(connection: Connection) -> dict[str, Any]:
    inspector = sa.inspect(connection)
    return {
        "columns": inspector.get_columns("tasks"),
        "primary_key": inspector.get_pk_constraint("tasks")["constrained_columns"],
        "indexes": inspector.get_indexes("tasks"),
    }


async def test_migrated_task_table_matches_the_sdk_model(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            reflected = await connection.run_sync(_reflect_tasks)
    finally:
        await engine.dispose()
    dialect = engine.dialect
    model = cast(sa.Table, TaskModel.__table__)

    columns = {
        column["name"]: (column["type"].compile(dialect), column["nullable"])
        for column in reflected["columns"]
    }
    assert columns == {
        column.name: (column.type.compile(dialect), column.nullable) for column in model.columns
    }
    assert reflected["primary_key"] == [column.name for column in model.primary_key.columns]
    indexes = {
        (index["name"], tuple(index["column_names"]), bool(index["unique"])) for index in reflected["indexes"]
    }
    assert indexes == {
        (index.name, tuple(column.name for column in index.columns), bool(index.unique))
        for index in model.indexes
    }
