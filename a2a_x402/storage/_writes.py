"""Writes to SQLite, committed in groups on one writer thread; to PostgreSQL, each in its own transaction.

A write is a plain function of a synchronous SQLAlchemy `Connection`, so a whole group of them can run
without coming back to the event loop between statements.

SQLite allows one writer at a time. Letting each coroutine open its own write transaction makes them
queue (in SQLite's busy handler, or on a lock) while each holder needs several event-loop turns to get
its statements through aiosqlite's thread; under load those turns are slow and the queue grows. So on
SQLite every write is handed to one writer task that runs whatever has queued up in a single
transaction (each write in its own savepoint, so one failing write undoes only itself) and resolves
the callers once that transaction has committed. The group runs as one call on a thread of its own,
through the standard library's `sqlite3` driver on the same database file: one hop off the event loop
per group, where aiosqlite makes about eight per statement (cursor, execute, fetch, close, and the
transaction's begin, commit and reset). Reads keep the async engine: in WAL mode they never wait for
this writer, and they see what it committed. PostgreSQL writers need none of this: they run their
own transactions, and row locks and unique constraints arbitrate, across processes too.

Writes that need the async engine (several statements with the event loop between them) go through
`write_transaction`. On SQLite it lets one of them, or one group of the writer, hold the database at a
time per process: otherwise a writer finding the write lock taken sleeps in SQLite's busy handler (1, 2,
5, … 100 ms between tries) while holding a pooled connection, and at 32 concurrent paid tasks most of
the pool sat in those sleeps with the lock free. Queued on an `asyncio.Lock`, the next writer starts
as soon as the previous one commits, and waits without a connection. Every write of the project's own
goes through one of the two; writes outside them (the a2a-sdk's task deletes and push-notification
configs, another process on the same file) still meet SQLite's busy handler, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, event
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ._engine import sqlite_pragmas
from ._errors import DatabaseUrlError

__all__ = ["Write", "write", "write_transaction"]

T = TypeVar("T")
Write = Callable[[Connection], T]
"""A write: statements run on `Connection` inside a transaction the caller does not manage."""

_MAX_GROUP = 64

_Queued = tuple[Write[Any], bool, asyncio.Future[Any]]


class _GroupWriter:
    def __init__(self, engine: AsyncEngine) -> None:
        if engine.url.database in (None, "", ":memory:") or "mode=memory" in str(engine.url):
            # The writer's own connection would open a second, empty database of its own.
            raise DatabaseUrlError("an in-memory SQLite database cannot take writes: use a database file")
        # `check_same_thread` off: the pool may be disposed from the event loop's thread.
        self._sync: Engine = create_sync_engine(
            engine.url.set(drivername="sqlite"),
            connect_args={"timeout": 30, "check_same_thread": False},
        )
        event.listen(self._sync, "connect", _own_transactions)
        event.listen(self._sync, "connect", sqlite_pragmas)
        # The group's transaction begins when SQLAlchemy begins it, holding the write lock from its first
        # statement: left to the driver, a group opening with a savepoint would have that savepoint's
        # release commit it, and a later failure in the group could no longer undo it.
        event.listen(self._sync, "begin", lambda connection: connection.exec_driver_sql("BEGIN IMMEDIATE"))
        # One thread: the group's transaction is the only writer this process has on the file.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        self._queue: list[_Queued] = []
        self._task: asyncio.Task[None] | None = None

    def dispose(self) -> None:
        """Close the writer's connection (its engine was disposed; a later write opens a new one)."""
        self._sync.dispose()

    async def submit(self, operation: Write[T], isolated: bool, lock: asyncio.Lock) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.append((operation, isolated, future))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(lock), name="sqlite-group-writer")
        return await future

    async def _run(self, lock: asyncio.Lock) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            async with lock:
                group, self._queue = self._queue[:_MAX_GROUP], self._queue[_MAX_GROUP:]
                operations = [(operation, isolated) for operation, isolated, _ in group]
                outcomes = await loop.run_in_executor(self._thread, self._commit, operations)
            for (_, _, future), (ok, value) in zip(group, outcomes, strict=True):
                if future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)

    def _commit(self, group: list[tuple[Write[Any], bool]]) -> list[tuple[bool, Any]]:
        """Run `group` in one transaction (on the writer thread); each write's (ok, result or exception)."""
        outcomes: list[tuple[bool, Any]] = []
        try:
            with self._sync.begin() as connection:
                for operation, isolated in group:
                    try:
                        if isolated:
                            with connection.begin_nested():
                                result = operation(connection)
                        else:
                            result = operation(connection)
                        outcomes.append((True, result))
                    except Exception as exc:  # noqa: BLE001 - handed to the caller that owns the write
                        if not isolated:
                            raise
                        outcomes.append((False, exc))
        except Exception as exc:  # noqa: BLE001 - the group's transaction failed: so did all its writes
            return [(False, exc)] * len(group)
        return outcomes


def _own_transactions(dbapi_connection: Any, _record: Any) -> None:
    # The standard library's driver otherwise opens transactions itself, before the first change only.
    dbapi_connection.isolation_level = None


_writers: weakref.WeakKeyDictionary[AsyncEngine, _GroupWriter] = weakref.WeakKeyDictionary()


class _Turn(asyncio.Lock):
    """The writers' lock, knowing which task holds it for a transaction: a write that task starts inside
    its own would wait for itself, so it is refused instead."""

    holder: asyncio.Task[Any] | None = None

    def refuse_reentry(self) -> None:
        if self.locked() and self.holder is not None and self.holder is asyncio.current_task():
            raise RuntimeError(
                "a write on this SQLite database inside this task's own write transaction would wait for"
                " itself: use the transaction's connection"
            )


_locks: weakref.WeakKeyDictionary[
    AsyncEngine, weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turn]
] = weakref.WeakKeyDictionary()


def _write_lock(engine: AsyncEngine) -> _Turn:
    """This process's writer lock of a SQLite `engine`, one per event loop (a lock belongs to one)."""
    loop = asyncio.get_running_loop()
    by_loop = _locks.get(engine)
    if by_loop is None:
        by_loop = _locks[engine] = weakref.WeakKeyDictionary()
    lock = by_loop.get(loop)
    if lock is None:
        lock = by_loop[loop] = _Turn()
    return lock


def _writer(engine: AsyncEngine) -> _GroupWriter:
    writer = _writers.get(engine)
    if writer is None:
        writer = _writers[engine] = _GroupWriter(engine)
        event.listen(engine.sync_engine, "engine_disposed", lambda _: writer.dispose())
    return writer


async def write(engine: AsyncEngine, operation: Write[T], *, isolated: bool = False) -> T:
    """Run `operation` in a write transaction and return its result once it is committed.

    On SQLite the transaction is shared with other writes queued meanwhile, and runs on a thread of its
    own: `operation` must not touch the event loop. An `isolated` operation runs in its own savepoint, so
    an exception it raises (a unique-constraint violation, say) is raised here and undoes only its own
    statements; any other operation that raises fails its whole group, so use `isolated` for every write
    that can fail on the data.

    Raises:
        DatabaseUrlError: `engine` is an in-memory SQLite database (the writer's thread cannot share it).
        RuntimeError: called inside this task's own `write_transaction` on a SQLite `engine`.
    """
    if engine.dialect.name != "sqlite":
        async with engine.begin() as connection:
            return await connection.run_sync(operation)
    turn = _write_lock(engine)
    turn.refuse_reentry()
    return await _writer(engine).submit(operation, isolated, turn)


@contextlib.asynccontextmanager
async def write_transaction(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """`engine.begin()` for a write: committed when the block ends, rolled back if it raises.

    On SQLite the block waits its turn behind this process's other writers (the transactions begun
    here and the groups of `write`) before taking a connection: nothing inside may wait for another
    write on `engine`, or it would wait for itself. The same task starting one is refused; a task it
    awaits (`gather`, `shield`, `wait_for` on Python 3.11), another engine object on the same file, or a
    nested write on PostgreSQL touching a row this transaction holds would still wait, and none is done.

    Raises:
        RuntimeError: called inside this task's own `write_transaction` on a SQLite `engine`.
    """
    if engine.dialect.name != "sqlite":
        async with engine.begin() as connection:
            yield connection
        return
    turn = _write_lock(engine)
    turn.refuse_reentry()
    async with turn:
        turn.holder = asyncio.current_task()
        try:
            async with engine.begin() as connection:
                yield connection
        finally:
            turn.holder = None
