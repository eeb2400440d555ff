"""The claim store's two writes of every settlement, rendered once and run on SQLite's own cursor.

Every settlement inserts its claim and records its outcome with an `UPDATE … RETURNING`. On SQLite both run
on the group writer's thread, holding the GIL for their Python part, and SQLAlchemy's execution of a cached
statement (an execution context, its events, a result and row objects) cost about as much again as the
statement itself: 56 and 68 µs where the driver's cursor takes about 28. So each statement is compiled once
per set of columns, with SQLAlchemy's own bind and result processors of its columns' types, and executed on
the cursor of the connection the group's transaction holds: the same SQL, the same stored bytes, the same
values read back, inside the same transaction and savepoints. A driver error is raised as SQLAlchemy would
raise it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

__all__ = ["PreparedStatement"]

_Processor = Callable[[Any], Any] | None


class PreparedStatement:
    """`statement` with the columns `keys` set, compiled for `dialect`, returning `returning` (or nothing)."""

    def __init__(
        self,
        statement: sa.Insert | sa.Update,
        dialect: sa.Dialect,
        keys: Sequence[str],
        returning: Sequence[sa.Column[Any]],
    ):
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        self._sql = compiled.string
        binds = compiled.binds
        # Each positional parameter: its name in the caller's parameters, or a literal of the statement.
        self._params: list[tuple[str, Any, _Processor]] = [
            (
                name,
                binds[name].effective_value,
                binds[name].type.dialect_impl(dialect).bind_processor(dialect),
            )
            for name in compiled.positiontup or ()
        ]
        self._literal = {name for name in binds if name not in keys}
        self._columns: list[tuple[str, _Processor]] = [
            (column.key, column.type.dialect_impl(dialect).result_processor(dialect, None))
            for column in returning
        ]

    def first(self, connection: sa.Connection, parameters: Mapping[str, Any]) -> dict[str, Any] | None:
        """Run the statement in `connection`'s transaction; its first returned row by column, or None."""
        values = tuple(
            _processed(processor, literal if name in self._literal else parameters[name])
            for name, literal, processor in self._params
        )
        cursor = connection.connection.cursor()
        try:
            cursor.execute(self._sql, values)
            row = cursor.fetchone() if self._columns else None
        except sqlite3.Error as exc:
            raise DBAPIError.instance(self._sql, values, exc, sqlite3.Error) from exc
        finally:
            cursor.close()
        if row is None:
            return None
        return {
            key: _processed(processor, value)
            for (key, processor), value in zip(self._columns, row, strict=True)
        }


def _processed(processor: _Processor, value: Any) -> Any:
    return value if processor is None else processor(value)
