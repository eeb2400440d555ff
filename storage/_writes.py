"""Writes to SQLite, committed in groups by one writer task.

SQLite allows one writer at a time. Letting each coroutine open its own write transaction makes them
queue (in SQLite's busy handler, or on a lock) while each holder needs several event-loop turns to get
its statements through aiosqlite's thread; under load those turns are slow and the queue grows. So on
SQLite every write is handed to one writer task that runs whatever has queued up in a single
transaction (each write in its own savepoint, so one failing write undoes only itself) and resolves
the callers once that transaction has committed. PostgreSQL writers need none of this: they run
their own transactions, and row locks and unique constraints arbitrate, across processes too.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = ["write"]

T = TypeVar("T")
Write = Callable[[AsyncConnection], Awaitable[T]]

_MAX_GROUP = 64


class _GroupWriter:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._queue: list[tuple[Write[Any], bool, asyncio.Future[Any]]] = []
        self._task: asyncio.Task[None] | None = None

    async def submit(self, operation: Write[T], isolated: bool) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append((operation, isolated, future))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sqlite-group-writer")
        return await future

    async def _run(self) -> None:
        while self._queue:
            group, self._queue = self._queue[:_MAX_GROUP], self._queue[_MAX_GROUP:]
            outcomes: list[tuple[asyncio.Future[Any], bool, Any]] = []
            try:
                async with self._engine.begin() as connection:
                    for operation, isolated, future in group:
                        try:
                            if isolated:
                                async with connection.begin_nested():
                                    result = await operation(connection)
                            else:
                                result = await operation(connection)
                            outcomes.append((future, True, result))
                        except Exception as exc:  # noqa: BLE001 - handed to the caller that owns the write
                            if not isolated:
                                raise
                            outcomes.append((future, False, exc))
            except Exception as exc:  # noqa: BLE001 - the group's transaction failed: so did all its writes
                outcomes = [(future, False, exc) for _, _, future in group]
            for future, ok, value in outcomes:
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)


_writers: weakref.WeakKeyDictionary[AsyncEngine, _GroupWriter] = weakref.WeakKeyDictionary()


async def write(engine: AsyncEngine, operation: Write[T], *, isolated: bool = False) -> T:
    """Run `operation` in a write transaction and return its result once it is committed.

    On SQLite the transaction is shared with other writes queued meanwhile. An `isolated` operation runs
    in its own savepoint, so an exception it raises (a unique-constraint violation, say) is raised here and
    undoes only its own statements; any other operation that raises fails its whole group, so use
    `isolated` for every write that can fail on the data.
    """
    if engine.dialect.name != "sqlite":
        async with engine.begin() as connection:
            return await operation(connection)
    writer = _writers.get(engine)
    if writer is None:
        writer = _writers[engine] = _GroupWriter(engine)
    return await writer.submit(operation, isolated)
